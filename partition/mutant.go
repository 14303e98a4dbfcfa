package partition

// mutated reports whether the named planted bug is active (mutant_on.go).
// Each call site is one bug a tired engineer could write, listed with what
// it breaks in partition/sim/mutants.txt; make mutants checks that the
// simulator's oracle catches every one.
func mutated(name string) bool { return activeMutant == name }
