package inbound

import (
	"encoding/json"
	"errors"

	"github.com/laneway/laneway/internal/kafka/table"
	"github.com/laneway/laneway/internal/model/sealing"
	"github.com/laneway/laneway/internal/security/secretbox"
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

func encodeSource(src Source, box sealing.Box) ([]byte, error) {
	rec := sourceRecord{Source: src, CaptureTokenSet: src.CaptureToken != ""}
	secrets := secretsOf(&src)
	var err error
	if rec.SecretsSealed, err = box.Seal(src.ID, secrets); err != nil {
		return nil, err
	}
	if rec.SecretsSealed == nil {
		rec.Secret, rec.PreviousSecret = secrets.Secret, secrets.PreviousSecret
		rec.CaptureToken, rec.PreviousCaptureToken = secrets.CaptureToken, secrets.PreviousCaptureToken
	}
	return json.Marshal(rec)
}

// sourceCodec is the table codec of source records, sealing with its box.
type sourceCodec struct{ box sealing.Box }

func newSourceCodec(ring *secretbox.Ring) sourceCodec {
	return sourceCodec{sealing.Box{Ring: ring, Kind: "source"}}
}

func (sourceCodec) ID(src Source) string { return src.ID }

func (c sourceCodec) Encode(src Source) ([]byte, error) { return encodeSource(src, c.box) }

// Decode reads a record value of id. Secrets that do not open leave the
// source held: no secrets, and heldErr set, so that Verify rejects its
// requests rather than check them against nothing.
func (c sourceCodec) Decode(id string, value []byte) (Source, table.Seal, error) {
	var rec sourceRecord
	var secrets sourceSecrets
	fields := func() (string, *secretbox.Sealed) { return rec.ID, rec.SecretsSealed }
	seal, plaintext, err := c.box.Decode(id, value, &rec, fields, &secrets)
	if err != nil {
		return Source{}, table.Seal{}, err
	}
	src := rec.Source
	if plaintext {
		secrets = sourceSecrets{rec.Secret, rec.PreviousSecret, rec.CaptureToken, rec.PreviousCaptureToken}
	} else if seal.Err != nil {
		src.heldErr, src.heldToken = seal.Err, rec.CaptureTokenSet
		secrets = sourceSecrets{} // nothing half-opened
	}
	secrets.setOn(&src)
	return src, seal, nil
}
