package stdverify

import (
	"testing"
	"time"

	"github.com/laneway/laneway/signing"
)

func TestVerifierChecksWithTheSecretSetLast(t *testing.T) {
	const first, second = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	body := []byte(`{"id":"ev_1"}`)
	signer, err := signing.NewSigner([]string{first})
	if err != nil {
		t.Fatal(err)
	}
	h := signer.Headers("msg_1", time.Now(), body)
	var v Verifier
	if v.Valid(body, h) {
		t.Error("valid before a secret was set")
	}
	if err := v.SetSecret(first); err != nil {
		t.Fatal(err)
	}
	if !v.Valid(body, h) {
		t.Error("a request signed with the secret set is not valid")
	}
	if v.Valid([]byte(`{"id":"ev_2"}`), h) {
		t.Error("another body is valid")
	}
	if err := v.SetSecret(second); err != nil {
		t.Fatal(err)
	}
	if v.Valid(body, h) {
		t.Error("valid with a secret no longer set")
	}
	if err := v.SetSecret("not base64 !"); err == nil {
		t.Error("a malformed secret was taken")
	}
}
