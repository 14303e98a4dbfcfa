// Package stdverify checks Laneway's signatures with the official Standard
// Webhooks library, as a customer's receiver would: an implementation
// independent of Laneway's signing package, so that a signing bug cannot
// hide behind the receivers Laneway runs itself (the demo's and the test
// kit's) checking with its own code.
package stdverify

import (
	"net/http"
	"sync/atomic"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Verifier checks signatures with the secret set last. It is safe for
// concurrent use; the zero Verifier accepts nothing until SetSecret.
type Verifier struct {
	wh atomic.Pointer[standardwebhooks.Webhook]
}

// SetSecret sets the secret requests are signed with (whsec_…).
func (v *Verifier) SetSecret(secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	v.wh.Store(wh)
	return nil
}

// Valid reports whether body and h carry a valid signature.
func (v *Verifier) Valid(body []byte, h http.Header) bool {
	wh := v.wh.Load()
	return wh != nil && wh.Verify(body, h) == nil
}
