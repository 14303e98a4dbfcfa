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
