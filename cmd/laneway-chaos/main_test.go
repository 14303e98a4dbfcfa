package main

import "testing"

func TestPresetArg(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "ci"},
		{[]string{"-scenarios", "kill9"}, "ci"},
		{[]string{"-scale", "large", "-rate", "5"}, "large"},
		{[]string{"--scale=large"}, "large"},
	} {
		if got := presetArg(tt.args); got != tt.want {
			t.Errorf("presetArg(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestRunRefusesBadArguments checks the exits that need no broker.
func TestRunRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"-scale", "huge"},
		{"-scenarios", "nosuch"},
		{"-no-such-flag"},
		{"extra"},
		{"-root", t.TempDir()}, // not the repository root
	} {
		if code := run(args); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
}
