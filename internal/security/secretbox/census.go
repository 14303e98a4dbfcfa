package secretbox

// Plaintext is the Census.ByKey entry of records whose secrets are not
// sealed: written before sealing, or by an instance without a key file.
const Plaintext = "plaintext"

// Census counts a store's records by the key their secrets are sealed
// under, so an operator can tell when an old key holds nothing any more.
type Census struct {
	// ByKey maps a key id (or "plaintext") to its number of records.
	ByKey map[string]int `json:"by_key"`
	// Unreadable maps the id of each record whose secrets do not open to why.
	Unreadable map[string]string `json:"unreadable"`
	// Rewritten is how many records a rekey rewrote under the newest key.
	Rewritten int `json:"rewritten"`
}

// NewCensus returns an empty census.
func NewCensus() Census {
	return Census{ByKey: map[string]int{}, Unreadable: map[string]string{}}
}

// Count adds one record sealed under keyID ("" for plaintext).
func (c *Census) Count(keyID string) {
	if keyID == "" {
		keyID = Plaintext
	}
	c.ByKey[keyID]++
}
