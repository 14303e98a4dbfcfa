//go:build !simbug

package partition

// reintroduceCopyBug is false in every real build; see bug_on.go.
const reintroduceCopyBug = false
