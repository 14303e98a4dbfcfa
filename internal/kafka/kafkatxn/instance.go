package kafkatxn

import "os"

// DefaultInstanceID names this instance for transactional ids and static
// group membership, for every stage that has them (the fan-out, the
// inbound verify stage). It is the hostname, stable across restarts (the
// same pod), so a restarted instance fences the transaction its previous
// run left open instead of waiting for it to time out, and takes its old
// place in the consumer groups; "laneway" when there is no hostname.
func DefaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "laneway"
	}
	return host
}
