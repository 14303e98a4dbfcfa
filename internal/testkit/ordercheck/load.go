package ordercheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// ReadNDJSON decodes one JSON value per line of r into a slice of T. Blank
// lines are skipped; a torn last line (a writer killed mid-line) is
// reported as an error, since a checker must not guess.
func ReadNDJSON[T any](r io.Reader) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// ReadFile reads an NDJSON file of T.
func ReadFile[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := ReadNDJSON[T](bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ReadFiles reads and concatenates every file matching any of the glob
// patterns (several receivers, or a log per run, may each write one).
func ReadFiles[T any](patterns ...string) ([]T, error) {
	var paths []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no such file", p)
		}
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	var out []T
	for _, p := range paths {
		vs, err := ReadFile[T](p)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// ReadEndpoints reads the endpoints file: a JSON array of Endpoint, or
// NDJSON, one Endpoint per line.
func ReadEndpoints(path string) ([]Endpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var eps []Endpoint
	if err := json.Unmarshal(b, &eps); err == nil {
		return eps, nil
	}
	return ReadFile[Endpoint](path)
}
