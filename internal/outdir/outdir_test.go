package outdir

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestOfAndRemoveEmpty: Of lists the levels MkdirAll creates, deepest
// first; RemoveEmpty removes them while they are empty, never a directory
// that existed before, nor one that holds a file, nor its parents.
func TestOfAndRemoveEmpty(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "a", "b", "c")
	m := Of(out)
	if want := (Missing{out, filepath.Join(root, "a", "b"), filepath.Join(root, "a")}); !slices.Equal(m, want) {
		t.Fatalf("Of(%s) = %v, want %v", out, m, want)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	m.RemoveEmpty()
	if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Errorf("a/b/c made and left empty: a still there (%v)", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("the directory that existed before is gone: %v", err)
	}

	if m := Of(root); len(m) != 0 {
		t.Errorf("Of(existing %s) = %v, want none", root, m)
	}
	Missing(nil).RemoveEmpty()

	m = Of(out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a", "b", "kept"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m.RemoveEmpty()
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a/b/c empty: still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a", "b", "kept")); err != nil {
		t.Errorf("a/b holds a file: %v", err)
	}
}

// TestOfRelative: a relative path ends at the working directory, which
// exists.
func TestOfRelative(t *testing.T) {
	t.Chdir(t.TempDir())
	if got, want := Of(filepath.Join("x", "y")), (Missing{filepath.Join("x", "y"), "x"}); !slices.Equal(got, want) {
		t.Errorf("Of(x/y) = %v, want %v", got, want)
	}
}
