package coalesce

import "testing"

func TestDecide(t *testing.T) {
	state := func(rev int64) Version { return Version{Revision: rev, Coalesce: true} }
	fact := func(rev int64) Version { return Version{Revision: rev} }

	tests := []struct {
		name              string
		pending, incoming Version
		want              Decision
	}{
		{"newer state replaces pending state", state(3), state(4), ReplacePending},
		{"much newer state replaces pending state", state(3), state(300), ReplacePending},
		{"equal revision replaces: duplicate kept once", state(3), state(3), ReplacePending},
		{"older state is dropped, never delivered after newer", state(4), state(3), DropIncoming},
		{"revision zero on both replaces", state(0), state(0), ReplacePending},
		{"fact after state is appended", state(3), fact(4), Append},
		{"state after fact is appended", fact(3), state(4), Append},
		{"facts are never merged", fact(3), fact(4), Append},
		{"facts with equal revision are never merged", fact(3), fact(3), Append},
		{"older fact is still appended", state(4), fact(1), Append},
		{"older state behind a fact is still appended", fact(4), state(1), Append},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.pending, tt.incoming); got != tt.want {
				t.Fatalf("Decide(%+v, %+v) = %v, want %v", tt.pending, tt.incoming, got, tt.want)
			}
		})
	}
}

func TestDecisionZeroValueIsAppend(t *testing.T) {
	var d Decision
	if d != Append {
		t.Fatalf("zero Decision = %v, want append: a forgotten decision must never drop an event", d)
	}
}

func TestDecisionString(t *testing.T) {
	for d, want := range map[Decision]string{
		Append: "append", ReplacePending: "replace_pending", DropIncoming: "drop_incoming", Decision(9): "unknown",
	} {
		if got := d.String(); got != want {
			t.Errorf("Decision(%d).String() = %q, want %q", uint8(d), got, want)
		}
	}
}
