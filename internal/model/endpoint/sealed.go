package endpoint

import (
	"encoding/json"
	"fmt"

	"github.com/laneway/laneway/internal/secretbox"
	"github.com/laneway/laneway/internal/table"
)

// record is an Endpoint as its value on the config topic: the secrets
// sealed in SecretsSealed when the store has a key ring, or in plaintext in
// Secrets (records written before sealing existed, or with
// --allow-plaintext-secrets). Its Secrets shadows Endpoint's.
type record struct {
	Endpoint
	Secrets       []Secret          `json:"secrets,omitempty"`
	SecretsSealed *secretbox.Sealed `json:"secrets_sealed,omitempty"`
}

// sealAAD binds an endpoint's sealed secrets to its id, so that they cannot
// be copied into another endpoint's (or a source's) record.
func sealAAD(id string) string { return "laneway/endpoint/" + id }

// encodeRecord is e as a record value, its secrets sealed under the newest
// key of ring (plaintext when ring is nil).
func encodeRecord(e Endpoint, ring *secretbox.Ring) ([]byte, error) {
	rec := record{Endpoint: e}
	if ring == nil {
		rec.Secrets = e.Secrets
		return json.Marshal(rec)
	}
	sealed, err := ring.SealJSON(sealAAD(e.ID), e.Secrets)
	if err != nil {
		return nil, err
	}
	rec.SecretsSealed = sealed
	return json.Marshal(rec)
}

// codec is the table codec of endpoint records, sealing with ring (nil:
// plaintext).
type codec struct{ ring *secretbox.Ring }

func (codec) ID(e Endpoint) string { return e.ID }

func (c codec) Encode(e Endpoint) ([]byte, error) { return encodeRecord(e, c.ring) }

// Decode reads a record value of id. Only a value that is not an endpoint
// of this id is an error. An endpoint whose secrets do not open is held:
// without secrets, and paused, so that its deliveries wait in Kafka rather
// than go out unsigned.
func (c codec) Decode(id string, value []byte) (Endpoint, table.Seal, error) {
	var rec record
	if err := json.Unmarshal(value, &rec); err != nil {
		return Endpoint{}, table.Seal{}, err
	}
	if rec.ID != id {
		return Endpoint{}, table.Seal{}, fmt.Errorf("record of key %q holds endpoint %q", id, rec.ID)
	}
	e := rec.Endpoint
	if rec.SecretsSealed == nil {
		e.Secrets = rec.Secrets
		return e, table.Seal{}, nil
	}
	seal := table.Seal{KeyID: rec.SecretsSealed.KeyID}
	if seal.Err = c.ring.OpenJSON(sealAAD(id), rec.SecretsSealed, &e.Secrets); seal.Err != nil {
		e.Secrets, e.Paused = nil, true
	}
	return e, seal, nil
}
