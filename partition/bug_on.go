//go:build simbug

package partition

// reintroduceCopyBug brings back, in builds tagged simbug only, the bug that
// started the simulator: an original that fails while its parked copy
// exists returns to its lane instead of handing over to the copy, and the
// copy read back is pushed into the lane with coalescing, so it replaces
// the original (equal revision), the original counts as finished, and the
// copy is then skipped as a finished copy: the delivery is lost. go test -tags simbug ./partition/sim -run CopyBug
// shows the simulator finds it.
const reintroduceCopyBug = true
