// Package validate checks Laneway's deployment artifacts: the Dockerfile and
// its build context, docker-compose.yml, the Kustomize manifests, the
// Prometheus configuration and alert rules and the Grafana dashboard. It is
// a module of its own so that the Kubernetes, Compose and Prometheus
// libraries it needs stay out of Laneway's go.mod, and it imports none of
// Laneway's packages: it runs the laneway binary, built from the repository.
// Run it from here:
//
//	cd deploy/validate && go test ./...
package validate

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite generated files (the PrometheusRule from alerts.yml)")

// root is the repository root (deploy/validate/../..).
var root = func() string {
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return abs
}()

func repoPath(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }

var tempDirs []string

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

func readFile(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoPath(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- the laneway binary, built from the Docker build context ----

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// dockerBuild copies the Docker build context (the repository minus what
// .dockerignore excludes) and builds the image's two binaries from it the
// way the Dockerfile does (CGO_ENABLED=0), so
// a .dockerignore that drops a needed file fails here and not in docker
// build. It returns the directory holding laneway and laneway-healthcheck.
func dockerBuild(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() { binDir, binErr = buildFromContext() })
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

func buildFromContext() (string, error) {
	tmp, err := os.MkdirTemp("", "laneway-docker-context-")
	if err != nil {
		return "", err
	}
	tempDirs = append(tempDirs, tmp)
	ctxDir := filepath.Join(tmp, "context")
	files, err := contextFiles()
	if err != nil {
		return "", err
	}
	for _, rel := range files {
		src, dst := repoPath(rel), filepath.Join(ctxDir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
	}
	out := filepath.Join(tmp, "bin")
	for name, pkg := range map[string]string{"laneway": "./cmd/laneway", "laneway-healthcheck": "./deploy/healthcheck"} {
		// CGO_ENABLED=0 as in the image (a static binary). -trimpath and
		// -ldflags "-s -w" (checked in TestDockerfile) are left out: they
		// change no file the build needs and would compile everything anew.
		cmd := exec.Command("go", "build", "-o", filepath.Join(out, name), pkg)
		cmd.Dir = ctxDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s in the Docker build context (is a needed file in .dockerignore?): %v\n%s", pkg, err, b)
		}
	}
	return out, nil
}

// serveEnv returns every LANEWAY_* variable `laneway serve` reads, from
// `laneway serve --help` of the binary built from the Docker context.
func serveEnv(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(filepath.Join(dockerBuild(t), "laneway"), "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("laneway serve --help: %v\n%s", err, out)
	}
	env := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(env (LANEWAY_[A-Z0-9_]+)`).FindAllStringSubmatch(string(out), -1) {
		env[m[1]] = true
	}
	if !env["LANEWAY_KAFKA_BROKERS"] || !env["LANEWAY_ADMIN_TOKEN"] {
		t.Fatalf("laneway serve --help lists no LANEWAY_KAFKA_BROKERS/LANEWAY_ADMIN_TOKEN:\n%s", out)
	}
	return env
}

// serveFlagNames are the flags of `laneway serve` (LANEWAY_HTTP_ADDR ->
// http-addr).
func serveFlagNames(t *testing.T) map[string]bool {
	flags := map[string]bool{}
	for env := range serveEnv(t) {
		flags[strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "LANEWAY_")), "_", "-")] = true
	}
	return flags
}

// ---- small helpers ----

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// markdownAnchors returns the GitHub anchors of a Markdown file's headings.
func markdownAnchors(md []byte) map[string]bool {
	anchors := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(md))
	inFence := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}
