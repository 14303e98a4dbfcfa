package endpoint

import (
	"encoding/json"

	"github.com/laneway/laneway/internal/kafka/table"
	"github.com/laneway/laneway/internal/model/sealing"
	"github.com/laneway/laneway/internal/security/secretbox"
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

// encodeRecord is e as a record value, its secrets sealed by box
// (plaintext without a ring).
func encodeRecord(e Endpoint, box sealing.Box) ([]byte, error) {
	rec := record{Endpoint: e}
	var err error
	if rec.SecretsSealed, err = box.Seal(e.ID, e.Secrets); err != nil {
		return nil, err
	}
	if rec.SecretsSealed == nil {
		rec.Secrets = e.Secrets
	}
	return json.Marshal(rec)
}

// codec is the table codec of endpoint records, sealing with its box.
type codec struct{ box sealing.Box }

func newCodec(ring *secretbox.Ring) codec { return codec{sealing.Box{Ring: ring, Kind: "endpoint"}} }

func (codec) ID(e Endpoint) string { return e.ID }

func (c codec) Encode(e Endpoint) ([]byte, error) { return encodeRecord(e, c.box) }

// Decode reads a record value of id. Only a value that is not an endpoint
// of this id is an error. An endpoint whose secrets do not open is held:
// without secrets, and paused, so that its deliveries wait in Kafka rather
// than go out unsigned.
func (c codec) Decode(id string, value []byte) (Endpoint, table.Seal, error) {
	var rec record
	var secrets []Secret
	fields := func() (string, *secretbox.Sealed) { return rec.ID, rec.SecretsSealed }
	seal, plaintext, err := c.box.Decode(id, value, &rec, fields, &secrets)
	if err != nil {
		return Endpoint{}, table.Seal{}, err
	}
	e := rec.Endpoint
	switch {
	case plaintext:
		e.Secrets = rec.Secrets
	case seal.Err != nil:
		e.Secrets, e.Paused = nil, true
	default:
		e.Secrets = secrets
	}
	return e, seal, nil
}
