package layering

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pathLike is a back-quoted name in docs/DESIGN.md's table that names a
// file or folder of the tree: it has a slash, and <x> stands for any name.
var pathLike = regexp.MustCompile("`([a-z][a-z0-9_]*/[A-Za-z0-9_./<>-]*)`")

// TestDesignTableNamesFiles: every file or folder that DESIGN.md's "Where
// to add things" table tells a contributor to touch exists, so that the
// table cannot go stale when a package moves.
func TestDesignTableNamesFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "### Where to add things")
	if start < 0 {
		t.Fatal(`docs/DESIGN.md has no "### Where to add things" table`)
	}
	table := doc[start:]
	if end := strings.Index(table[1:], "\n#"); end > 0 {
		table = table[:end+1]
	}
	placeholder := regexp.MustCompile(`<[a-z]+>`)
	n := 0
	for _, m := range pathLike.FindAllStringSubmatch(table, -1) {
		name := strings.TrimSuffix(m[1], "/")
		if strings.Count(name, ".") > 1 && !strings.Contains(name, "<") { // a Go name such as compute.Require, not a path
			continue
		}
		glob := placeholder.ReplaceAllString(name, "*")
		hits, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(hits) == 0 {
			t.Errorf("docs/DESIGN.md's table names %s, which matches no file", m[1])
		}
		n++
	}
	if n < 10 {
		t.Errorf("read %d paths from the table, want the table's paths (10 or more): did its format change?", n)
	}
}
