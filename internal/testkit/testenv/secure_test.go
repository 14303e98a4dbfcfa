package testenv

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// outcome records how RealSecure ended a test, without ending this one.
type outcome struct {
	testing.TB
	fatal, skip string
}

func (o *outcome) Helper() {}

func (o *outcome) Fatalf(format string, args ...any) {
	o.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Skipf(format string, args ...any) {
	o.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// realSecure runs RealSecure on a recorder, in a goroutine its Goexit can end.
func realSecure(t *testing.T) *outcome {
	o := &outcome{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RealSecure(o)
	}()
	<-done
	return o
}

// TestRealSecureFailsWhenRequired: CI (the test command) sets
// LANEWAY_TEST_REQUIRE_SECURE=1; a secure variable missing there fails the
// test, naming it, instead of skipping the SASL_SSL and TLS Redis tests.
func TestRealSecureFailsWhenRequired(t *testing.T) {
	for _, v := range secureVariables {
		t.Setenv(v, "127.0.0.1:1")
	}
	if o := realSecure(t); o.fatal != "" || o.skip != "" {
		t.Fatalf("every variable set: fatal %q, skip %q", o.fatal, o.skip)
	}
	t.Setenv(redisCAEnv, "")
	t.Setenv(RequireSecureEnv, "")
	if o := realSecure(t); o.skip == "" || o.fatal != "" {
		t.Errorf("%s unset, not required: fatal %q, skip %q; want a skip", redisCAEnv, o.fatal, o.skip)
	}
	t.Setenv(RequireSecureEnv, "1")
	if o := realSecure(t); !strings.Contains(o.fatal, redisCAEnv) {
		t.Errorf("%s unset, required: fatal %q, skip %q; want a failure naming it", redisCAEnv, o.fatal, o.skip)
	}
}

// TestTheTestCommandRequiresTheSecureServices: scripts/testenv.sh test,
// which starts the secure services, exports LANEWAY_TEST_REQUIRE_SECURE=1
// (cmd_test, in scripts/testenv/test.sh).
func TestTheTestCommandRequiresTheSecureServices(t *testing.T) {
	b, err := os.ReadFile("../../../scripts/testenv/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "\ncmd_test() {\n")
	if start < 0 {
		t.Fatal("no cmd_test in scripts/testenv/test.sh")
	}
	body := s[start:]
	body = body[:strings.Index(body, "\n}\n")]
	if !strings.Contains(body, "\texport "+RequireSecureEnv+"=1\n") {
		t.Errorf("cmd_test does not export %s=1", RequireSecureEnv)
	}
}
