// Package sealing seals the secrets of config records (endpoints on the
// endpoints topic, inbound sources on the sources topic) with a secretbox
// ring, bound to the record's kind and id so that sealed secrets cannot be
// copied into another record. Without a ring, records keep their secrets
// in plaintext (those written before sealing existed, or with
// --allow-plaintext-secrets), and plaintext records are read as they are.
//
// Each store's table codec keeps its own record format; Box holds what the
// codecs do alike.
package sealing

import (
	"encoding/json"
	"fmt"

	"github.com/laneway/laneway/internal/kafka/table"
	"github.com/laneway/laneway/internal/security/secretbox"
)

// Box seals and opens the secrets of one kind of record.
type Box struct {
	// Ring seals under its newest key and opens under any of its keys; nil
	// writes plaintext.
	Ring *secretbox.Ring
	// Kind names the records ("endpoint", "source") in the seal's
	// additional data and in errors. Existing sealed records depend on
	// it: do not change it.
	Kind string
}

// aad binds a record's sealed secrets to its kind and id.
func (b Box) aad(id string) string { return "laneway/" + b.Kind + "/" + id }

// Seal returns the secrets of record id sealed under the ring's newest
// key, or nil without a ring: the caller then writes them in plaintext.
func (b Box) Seal(id string, secrets any) (*secretbox.Sealed, error) {
	if b.Ring == nil {
		return nil, nil
	}
	return b.Ring.SealJSON(b.aad(id), secrets)
}

// Decode reads a record value of key id into rec. fields, called after
// decoding, gives the id rec holds (a value that is not a record of this
// id is an error) and its sealed secrets, which Decode opens into secrets.
// plaintext reports a record without sealed secrets: the caller takes
// them from rec. The seal says under which key they were sealed and, when
// they did not open, why (the record is then held by its table, and
// secrets must be left unused).
func (b Box) Decode(id string, value []byte, rec any, fields func() (string, *secretbox.Sealed), secrets any) (seal table.Seal, plaintext bool, err error) {
	if err := json.Unmarshal(value, rec); err != nil {
		return table.Seal{}, false, err
	}
	recID, sealed := fields()
	if recID != id {
		return table.Seal{}, false, fmt.Errorf("record of key %q holds %s %q", id, b.Kind, recID)
	}
	if sealed == nil {
		return table.Seal{}, true, nil
	}
	return table.Seal{KeyID: sealed.KeyID, Err: b.Ring.OpenJSON(b.aad(id), sealed, secrets)}, false, nil
}
