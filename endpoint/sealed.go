package endpoint

import (
	"encoding/json"
	"fmt"

	"github.com/laneway/laneway/internal/secretbox"
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

// decoded is a record read back: the endpoint, the key id its secrets were
// sealed under ("" for plaintext) and, when they did not open, why (the
// endpoint then has no secrets).
type decoded struct {
	e         Endpoint
	keyID     string
	secretErr error
}

// decodeRecord reads a record value of id. Only a value that is not an
// endpoint of this id is an error; secrets that do not open are reported
// in secretErr.
func decodeRecord(id string, value []byte, ring *secretbox.Ring) (decoded, error) {
	var rec record
	if err := json.Unmarshal(value, &rec); err != nil {
		return decoded{}, err
	}
	if rec.ID != id {
		return decoded{}, fmt.Errorf("record of key %q holds endpoint %q", id, rec.ID)
	}
	d := decoded{e: rec.Endpoint}
	if rec.SecretsSealed == nil {
		d.e.Secrets = rec.Secrets
		return d, nil
	}
	d.keyID = rec.SecretsSealed.KeyID
	if err := ring.OpenJSON(sealAAD(id), rec.SecretsSealed, &d.e.Secrets); err != nil {
		d.e.Secrets, d.secretErr = nil, err
	}
	return d, nil
}
