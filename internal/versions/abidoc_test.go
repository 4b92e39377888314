package versions

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// abiDoc is the repository's document of the NCCL 2.31/2.32 ABI facts,
// which the code cites by section.
const abiDoc = "ABI-2.31-2.32.md"

var (
	citation = regexp.MustCompile(`ABI-2\.31-2\.32\.md\s+§(\d+)`)
	// A path outside the repository (a working copy's notes) is a dead
	// reference for every other reader.
	outsidePath = regexp.MustCompile(`/work/[A-Za-z0-9_./-]+`)
)

// citationProblems checks the sources of the module at root: every citation
// of abiDoc names a section the document has ("## N."), and no source
// cites a path outside the repository.
func citationProblems(root string, sections map[string]bool) ([]string, int, error) {
	var out []string
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".c", ".h", ".md":
		default:
			return nil
		}
		if filepath.Base(path) == "abidoc_test.go" {
			return nil // this file names the patterns it looks for
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range citation.FindAllStringSubmatch(string(b), -1) {
			n++
			if !sections[m[1]] {
				out = append(out, rel+" cites "+abiDoc+" §"+m[1]+", which it does not have")
			}
		}
		for _, m := range outsidePath.FindAllString(string(b), -1) {
			out = append(out, rel+" cites "+m+", a path outside the repository")
		}
		return nil
	})
	return out, n, err
}

// docSections are the numbered sections ("## 4. ...") of the document text.
func docSections(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\d+)\. `).FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// Every "ABI-2.31-2.32.md §N" in the module's sources names a section of
// the document, and no source points at notes outside the repository.
func TestABIDocReferences(t *testing.T) {
	text, err := os.ReadFile(abiDoc)
	if err != nil {
		t.Fatal(err)
	}
	sections := docSections(string(text))
	for _, s := range []string{"3", "4", "5", "9", "10"} {
		if !sections[s] {
			t.Errorf("%s has no section %s", abiDoc, s)
		}
	}
	problems, n, err := citationProblems(filepath.Join("..", ".."), sections)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if n < 5 {
		t.Errorf("%d citations of %s found in the module; the walk missed the sources", n, abiDoc)
	}
}

// The check catches a citation of a missing section and a path outside the
// repository.
func TestABIDocReferencesCatch(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\n// See ABI-2.31-2.32.md §4 and ABI-2.31-2.32.md §12, and /work/wt/notes.md §3.\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, n, err := citationProblems(dir, docSections("## 4. Config\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(problems) != 2 || !strings.Contains(problems[0], "§12") || !strings.Contains(problems[1], "/work/wt/notes.md") {
		t.Errorf("%d citations, problems %q; want 2 citations, §12 and the outside path reported", n, problems)
	}
}
