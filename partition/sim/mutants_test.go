package sim

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMutantCatalogueMatchesTheOwner keeps mutants.txt and the planted
// checks in package partition in step: a mutant planted but not listed
// would never run under make mutants, and one listed but not planted would
// "survive" for nothing.
func TestMutantCatalogueMatchesTheOwner(t *testing.T) {
	listed := catalogue(t)
	planted := plantedMutants(t)
	if !slices.Equal(listed, planted) {
		t.Fatalf("mutants.txt lists %v\nthe owner plants %v", listed, planted)
	}
	if len(listed) < 30 {
		t.Fatalf("%d mutants: the catalogue must keep at least 30", len(listed))
	}
}

func catalogue(t *testing.T) []string {
	f, err := os.Open("mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 0 && !strings.HasPrefix(fields[0], "#") {
			names = append(names, fields[0])
		}
	}
	slices.Sort(names)
	return names
}

var plantedCheck = regexp.MustCompile(`mutated\("([a-z0-9-]+)"\)`)

func plantedMutants(t *testing.T) []string {
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range plantedCheck.FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
