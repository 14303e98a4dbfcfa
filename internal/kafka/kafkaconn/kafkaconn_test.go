package kafkaconn

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/plumbing/tlsfiles/tlstest"
)

func TestValidateRefusesBadCombinations(t *testing.T) {
	on := TLS{Enabled: true}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"cert without key", Config{TLS: TLS{CertFile: "c.pem"}}, "set both the cert file and the key file"},
		{"unknown mechanism", Config{SASL: SASL{Mechanism: "SCRAM-SHA-1", Username: "u", Password: "p"}}, `unknown mechanism "SCRAM-SHA-1"`},
		{"credentials without mechanism", Config{SASL: SASL{Username: "u", Password: "p"}}, "no mechanism"},
		{"scram without password", Config{SASL: SASL{Mechanism: ScramSHA512, Username: "u"}}, "missing password"},
		{"scram without username", Config{SASL: SASL{Mechanism: ScramSHA256, Password: "p"}}, "needs a username"},
		{"password twice", Config{TLS: on, SASL: SASL{Mechanism: Plain, Username: "u", Password: "p", PasswordFile: "f"}}, "given twice"},
		{"plain without tls", Config{SASL: SASL{Mechanism: Plain, Username: "u", Password: "p"}}, "PLAIN needs TLS"},
		{"oauth without token", Config{TLS: on, SASL: SASL{Mechanism: OAuthBearer}}, "missing token"},
		{"oauth without tls", Config{SASL: SASL{Mechanism: OAuthBearer, Token: "t"}}, "OAUTHBEARER needs TLS"},
		{"token with scram", Config{SASL: SASL{Mechanism: ScramSHA512, Username: "u", Password: "p", TokenFile: "f"}}, "only OAUTHBEARER uses one"},
		{"password with oauth", Config{TLS: on, SASL: SASL{Mechanism: OAuthBearer, Token: "t", Password: "p"}}, "does not use them"},
		{"aws key id without secret", Config{TLS: on, SASL: SASL{Mechanism: AWSMSKIAM, AWSAccessKeyID: "AKIA"}}, "go together"},
		{"aws secret without key id", Config{TLS: on, SASL: SASL{Mechanism: AWSMSKIAM, AWSSecretAccessKey: "s"}}, "go together"},
		{"aws without tls", Config{SASL: SASL{Mechanism: AWSMSKIAM}}, "AWS_MSK_IAM needs TLS"},
		{"aws creds with plain", Config{TLS: on, SASL: SASL{Mechanism: Plain, Username: "u", Password: "p", AWSAccessKeyID: "AKIA"}}, "only AWS_MSK_IAM uses them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want one containing %q", err, tc.want)
			}
			if _, err := tc.cfg.Opts(); err == nil {
				t.Fatal("Opts accepted what Validate refused")
			}
		})
	}
}

func TestValidateAcceptsEachMechanism(t *testing.T) {
	on := TLS{Enabled: true}
	for _, cfg := range []Config{
		{},
		{TLS: on},
		{TLS: on, SASL: SASL{Mechanism: "plain", Username: "u", Password: "p"}},
		{SASL: SASL{Mechanism: ScramSHA256, Username: "u", Password: "p"}}, // SCRAM never sends the password
		{TLS: on, SASL: SASL{Mechanism: ScramSHA512, Username: "u", PasswordFile: "f"}},
		{TLS: on, SASL: SASL{Mechanism: OAuthBearer, TokenFile: "f"}},
		{TLS: on, SASL: SASL{Mechanism: AWSMSKIAM}},
		{TLS: on, SASL: SASL{Mechanism: AWSMSKIAM, AWSAccessKeyID: "AKIA", AWSSecretAccessKeyFile: "f", AWSSessionToken: "t"}},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func TestOptsPerSetting(t *testing.T) {
	f := tlstest.Write(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"plaintext", Config{}, 0},
		{"tls", Config{TLS: TLS{CAFile: f.CA}}, 1},
		{"scram over plaintext", Config{SASL: SASL{Mechanism: ScramSHA512, Username: "u", Password: "p"}}, 1},
		{"mtls and scram", Config{TLS: TLS{CAFile: f.CA, CertFile: f.Cert, KeyFile: f.Key}, SASL: SASL{Mechanism: ScramSHA512, Username: "u", Password: "p"}}, 2},
	} {
		opts, err := tc.cfg.Opts()
		if err != nil || len(opts) != tc.want {
			t.Errorf("%s: %d options, %v; want %d, nil", tc.name, len(opts), err, tc.want)
		}
	}
}

func TestOptsRefusesAnUnreadableSecretFile(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"/nonexistent/password": "no such file", empty: "is empty"} {
		cfg := Config{SASL: SASL{Mechanism: ScramSHA512, Username: "u", PasswordFile: file}}
		if _, err := cfg.Opts(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("password file %s: error %v, want one containing %q", file, err, want)
		}
	}
}

// TestTokenFileIsReadAtEachAuthentication rewrites the token file between
// two authentications: the second must carry the new token, so a token
// refreshed on disk is used without a restart.
func TestTokenFileIsReadAtEachAuthentication(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	mech := SASL{Mechanism: OAuthBearer, TokenFile: file}.mechanismImpl()
	for _, token := range []string{"first-token", "second-token"} {
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, msg, err := mech.Authenticate(context.Background(), "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(msg), "auth=Bearer "+token+"\x01") {
			t.Fatalf("authentication message %q: want the token %q, trimmed", msg, token)
		}
	}
}

func TestPasswordFileIsReadAtEachAuthentication(t *testing.T) {
	file := filepath.Join(t.TempDir(), "password")
	s := SASL{Mechanism: Plain, Username: "laneway", PasswordFile: file}
	mech := s.mechanismImpl()
	for _, pass := range []string{"old-password", "new-password"} {
		if err := os.WriteFile(file, []byte(pass), 0o600); err != nil {
			t.Fatal(err)
		}
		_, msg, err := mech.Authenticate(context.Background(), "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		if want := "\x00laneway\x00" + pass; string(msg) != want {
			t.Fatalf("PLAIN message %q, want %q", msg, want)
		}
	}
}

// isolateAWS points the AWS SDK's default chain at nothing on this machine
// (no shared files, no instance metadata, no credential variables), so a
// test gives it only what it sets itself.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, v := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_REGION", "eu-west-1")
}

func TestAWSCredentialsFromTheEnvironment(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	t.Setenv("AWS_SESSION_TOKEN", "env-session")
	auth, err := SASL{Mechanism: AWSMSKIAM}.awsCredentials()(context.Background())
	if err != nil || auth.AccessKey != "AKIAENV" || auth.SecretKey != "env-secret" || auth.SessionToken != "env-session" {
		t.Fatalf("got %+v, %v: want the AWS_* variables", auth, err)
	}
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err = SASL{Mechanism: AWSMSKIAM, AWSAccessKeyID: "AKIACFG", AWSSecretAccessKeyFile: file}.awsCredentials()(context.Background())
	if err != nil || auth.AccessKey != "AKIACFG" || auth.SecretKey != "file-secret" || auth.SessionToken != "" {
		t.Fatalf("got %+v, %v: want the configured key id and the file's secret, no session token", auth, err)
	}
}

// TestAWSDefaultChainWithWebIdentity is MSK IAM on EKS with IRSA: no key
// configured, a projected web identity token and a role in the
// environment. The SDK's default chain trades the token at STS (a fake one
// on loopback) for temporary credentials, and each authentication asks the
// chain again: credentials that expired are replaced by fresh ones,
// without a restart.
func TestAWSDefaultChainWithWebIdentity(t *testing.T) {
	isolateAWS(t)
	var calls atomic.Int32
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" ||
			r.Form.Get("WebIdentityToken") != "projected-token" || r.Form.Get("RoleArn") != "arn:aws:iam::123456789012:role/laneway" {
			t.Errorf("STS got %v (%v): want AssumeRoleWithWebIdentity with the projected token and the role", r.Form, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		n := calls.Add(1)
		// Already expired: the next authentication must fetch new ones.
		expired := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAIRSA%d</AccessKeyId><SecretAccessKey>irsa-secret-%d</SecretAccessKey>
<SessionToken>irsa-session-%d</SessionToken><Expiration>%s</Expiration></Credentials>
<SubjectFromWebIdentityToken>system:serviceaccount:laneway:laneway</SubjectFromWebIdentityToken></AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>test</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`, n, n, n, expired)
	}))
	defer sts.Close()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("projected-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/laneway")
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)

	mech := SASL{Mechanism: AWSMSKIAM}.mechanismImpl()
	for i := 1; i <= 2; i++ {
		_, msg, err := mech.Authenticate(context.Background(), "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
		if err != nil {
			t.Fatalf("authentication %d: %v", i, err)
		}
		for _, want := range []string{fmt.Sprintf(`"ASIAIRSA%d/`, i), fmt.Sprintf(`"irsa-session-%d"`, i)} {
			if !strings.Contains(string(msg), want) {
				t.Fatalf("authentication %d: message %s, want %s in it", i, msg, want)
			}
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("STS called %d times, want 2 (once per authentication, the credentials having expired)", n)
	}
}

// TestAWSDefaultChainWithoutCredentials: with nothing for the chain to
// find, the authentication fails saying so rather than signing with
// empty keys.
func TestAWSDefaultChainWithoutCredentials(t *testing.T) {
	isolateAWS(t)
	_, err := SASL{Mechanism: AWSMSKIAM}.awsCredentials()(context.Background())
	if err == nil || !strings.Contains(err.Error(), "default credential chain") {
		t.Fatalf("err %v, want one naming the default credential chain", err)
	}
}
