//go:build !simmutant

package partition

// activeMutant is the empty constant in every real build, so that each
// mutated(name) is false at compile time and the compiler removes the
// planted branch: the hot path pays nothing for the catalogue.
const activeMutant = ""
