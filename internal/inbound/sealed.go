package inbound

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/laneway/laneway/internal/secretbox"
	"github.com/laneway/laneway/internal/table"
)

// ErrSecretsUnavailable is returned by SourceStore.Put for a source whose
// stored secrets this instance cannot open.
var ErrSecretsUnavailable = errors.New("the source's secrets cannot be decrypted with this instance's key file")

// sourceRecord is a Source as its value on the sources topic: the secrets
// sealed in SecretsSealed when the store has a key ring, or in plaintext
// (records written before sealing existed, or with
// --allow-plaintext-secrets). Its fields shadow Source's secret fields.
type sourceRecord struct {
	Source
	Secret               string            `json:"secret,omitempty"`
	PreviousSecret       string            `json:"previous_secret,omitempty"`
	CaptureToken         string            `json:"capture_token,omitempty"`
	PreviousCaptureToken string            `json:"previous_capture_token,omitempty"`
	SecretsSealed        *secretbox.Sealed `json:"secrets_sealed,omitempty"`
	// CaptureTokenSet is outside the seal so that a source whose secrets
	// do not open still keeps its bare path closed.
	CaptureTokenSet bool `json:"capture_token_set,omitempty"`
}

// sourceSecrets is what is sealed.
type sourceSecrets struct {
	Secret               string `json:"secret"`
	PreviousSecret       string `json:"previous_secret,omitempty"`
	CaptureToken         string `json:"capture_token,omitempty"`
	PreviousCaptureToken string `json:"previous_capture_token,omitempty"`
}

func secretsOf(s *Source) sourceSecrets {
	return sourceSecrets{Secret: s.Secret, PreviousSecret: s.PreviousSecret, CaptureToken: s.CaptureToken, PreviousCaptureToken: s.PreviousCaptureToken}
}

func (x sourceSecrets) setOn(s *Source) {
	s.Secret, s.PreviousSecret = x.Secret, x.PreviousSecret
	s.CaptureToken, s.PreviousCaptureToken = x.CaptureToken, x.PreviousCaptureToken
}

// sourceAAD binds a source's sealed secrets to its id, so that they cannot
// be copied into another source's (or an endpoint's) record.
func sourceAAD(id string) string { return "laneway/source/" + id }

func encodeSource(src Source, ring *secretbox.Ring) ([]byte, error) {
	rec := sourceRecord{Source: src, CaptureTokenSet: src.CaptureToken != ""}
	secrets := secretsOf(&src)
	if ring == nil {
		rec.Secret, rec.PreviousSecret = secrets.Secret, secrets.PreviousSecret
		rec.CaptureToken, rec.PreviousCaptureToken = secrets.CaptureToken, secrets.PreviousCaptureToken
		return json.Marshal(rec)
	}
	sealed, err := ring.SealJSON(sourceAAD(src.ID), secrets)
	if err != nil {
		return nil, err
	}
	rec.SecretsSealed = sealed
	return json.Marshal(rec)
}

// sourceCodec is the table codec of source records, sealing with ring
// (nil: plaintext).
type sourceCodec struct{ ring *secretbox.Ring }

func (sourceCodec) ID(src Source) string { return src.ID }

func (c sourceCodec) Encode(src Source) ([]byte, error) { return encodeSource(src, c.ring) }

// Decode reads a record value of id. Secrets that do not open leave the
// source held: no secrets, and heldErr set, so that Verify rejects its
// requests rather than check them against nothing.
func (c sourceCodec) Decode(id string, value []byte) (Source, table.Seal, error) {
	var rec sourceRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return Source{}, table.Seal{}, err
	}
	if rec.ID != id {
		return Source{}, table.Seal{}, fmt.Errorf("record of key %q holds source %q", id, rec.ID)
	}
	src := rec.Source
	if rec.SecretsSealed == nil {
		sourceSecrets{rec.Secret, rec.PreviousSecret, rec.CaptureToken, rec.PreviousCaptureToken}.setOn(&src)
		return src, table.Seal{}, nil
	}
	var secrets sourceSecrets
	seal := table.Seal{KeyID: rec.SecretsSealed.KeyID}
	if seal.Err = c.ring.OpenJSON(sourceAAD(id), rec.SecretsSealed, &secrets); seal.Err != nil {
		src.heldErr, src.heldToken = seal.Err, rec.CaptureTokenSet
		secrets = sourceSecrets{} // nothing half-opened
	}
	secrets.setOn(&src)
	return src, seal, nil
}
