//go:build simmutant

package partition

import "os"

// activeMutant names the planted bug this build runs with, read once from
// LANEWAY_MUTANT, in builds tagged simmutant only: make mutants runs the
// simulator once per name in partition/sim/mutants.txt and expects every
// one of them caught. Empty: no mutant, the owner as it is.
var activeMutant = os.Getenv("LANEWAY_MUTANT")
