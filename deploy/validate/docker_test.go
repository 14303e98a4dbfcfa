package validate

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// contextFiles lists the files docker build sends as the build context:
// every file under the repository root not excluded by .dockerignore,
// matched with the same library (moby/patternmatcher) Docker uses.
func contextFiles() ([]string, error) {
	f, err := os.Open(repoPath(".dockerignore"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, err
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, err
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		excluded, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Walk into an excluded directory only when a "!" pattern may
			// bring something inside it back.
			if excluded && (!pm.Exclusions() || rel == ".git") {
				return filepath.SkipDir
			}
			return nil
		}
		if !excluded && d.Type().IsRegular() {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// dockerfile is a parsed Dockerfile: instructions with line continuations
// joined, comments and parser directives dropped.
type instruction struct {
	cmd  string // upper case
	args string
	line int
}

func parseDockerfile(t *testing.T) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(readFile(t, "Dockerfile")), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatal("Dockerfile ends inside a continued line")
	}
	return out
}

// TestDockerfile checks the image recipe: pinned base images, a static
// trimmed build, a numeric non-root user, the exposed port and the
// entrypoint, and that its build context builds.
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t)
	args := map[string]string{}
	var stages [][]instruction
	for _, in := range ins {
		switch in.cmd {
		case "ARG":
			if name, def, ok := strings.Cut(in.args, "="); ok {
				args[name] = def
			}
		case "FROM":
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, found %d stage(s)", len(stages))
	}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string {
			if v, ok := args[k]; ok {
				return v
			}
			return "$" + k
		})
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$`)
	for _, st := range stages {
		fields := strings.Fields(st[0].args)
		var image string
		for _, f := range fields {
			if !strings.HasPrefix(f, "--") {
				image = expand(f)
				break
			}
		}
		if image == "scratch" {
			continue
		}
		if !pinned.MatchString(image) || !(strings.Contains(image[strings.LastIndex(image, "/")+1:], ":") || strings.Contains(image, "@sha256:")) ||
			strings.HasSuffix(image, ":latest") {
			t.Errorf("line %d: base image %q is not pinned to a tag or digest", st[0].line, image)
		}
	}

	build, final := stages[0], stages[len(stages)-1]
	buildText := ""
	for _, in := range build {
		buildText += in.cmd + " " + in.args + "\n"
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w"`, "./cmd/laneway", "./deploy/healthcheck"} {
		if !strings.Contains(buildText, want) {
			t.Errorf("build stage does not contain %s", want)
		}
	}
	base := strings.Fields(final[0].args)[0]
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final stage is FROM %s, want distroless static or scratch", base)
	}

	last := map[string]instruction{}
	copied := map[string]bool{}
	for _, in := range final {
		last[in.cmd] = in
		if in.cmd == "COPY" {
			f := strings.Fields(in.args)
			copied[f[len(f)-1]] = true
		}
	}
	if u, ok := last["USER"]; !ok || !regexp.MustCompile(`^[1-9][0-9]*(:[0-9]+)?$`).MatchString(u.args) {
		t.Errorf("final stage USER %q: want a numeric non-root uid[:gid]", u.args)
	}
	if e := last["EXPOSE"]; e.args != "8080" {
		t.Errorf("EXPOSE %q, want 8080", e.args)
	}
	if env := last["ENV"]; !strings.Contains(env.args, "LANEWAY_HTTP_ADDR=0.0.0.0:8080") {
		t.Errorf("the image should listen on the exposed port: ENV %q", env.args)
	}
	var entry, cmd []string
	if err := json.Unmarshal([]byte(last["ENTRYPOINT"].args), &entry); err != nil || len(entry) != 1 {
		t.Errorf("ENTRYPOINT %q: want exec form with the laneway binary", last["ENTRYPOINT"].args)
	} else if !copied[entry[0]] || filepath.Base(entry[0]) != "laneway" {
		t.Errorf("ENTRYPOINT %s is not a binary the final stage copies", entry[0])
	}
	if err := json.Unmarshal([]byte(last["CMD"].args), &cmd); err != nil || !slices.Equal(cmd, []string{"serve"}) {
		t.Errorf("CMD %q, want [\"serve\"]", last["CMD"].args)
	}

	files, err := contextFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "go.sum", "cmd/laneway/main.go", "deploy/healthcheck/main.go"} {
		if !slices.Contains(files, want) {
			t.Errorf("build context lacks %s", want)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "deploy/validate/") || strings.HasPrefix(f, ".git/") || strings.HasSuffix(f, "_test.go") {
			t.Errorf("build context includes %s", f)
		}
	}
	if testing.Short() {
		return
	}
	bin := dockerBuild(t)
	out, err := exec.Command("file", filepath.Join(bin, "laneway")).CombinedOutput()
	if err == nil && !strings.Contains(string(out), "statically linked") {
		t.Errorf("laneway built like the image is not static: %s", out)
	}
}
