package kafkatxn

import "testing"

func TestJavaStringHash(t *testing.T) {
	// Values of java.lang.String.hashCode (printed by a JVM), which the
	// broker uses to place a group on a __consumer_offsets partition.
	for s, want := range map[string]int32{
		"":                      0,
		"hello":                 99162322,
		"laneway-fanout":        -1957214491,
		"a-rather-long-group-1": 1969898627,
		"é€":                    15587,
	} {
		if got := javaStringHash(s); got != want {
			t.Errorf("javaStringHash(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestOffsetsPartitionFor(t *testing.T) {
	// The partitions the real broker (offsets.topic.num.partitions=8) put
	// these fan-out groups on, as its DescribeTransactions reported them
	// during fault runs; two of the hashes are negative.
	for _, group := range []string{"chaos-broker-6ba8a1-fanout", "chaos-broker-5d4158-fanout", "chaos-broker-d1948c-fanout"} {
		if got := offsetsPartitionFor(group, 8); got != 2 {
			t.Errorf("offsetsPartitionFor(%q, 8) = %d, want 2", group, got)
		}
	}
	if got := offsetsPartitionFor("", 50); got != 0 {
		t.Errorf("empty group: %d", got)
	}
}
