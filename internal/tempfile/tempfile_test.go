//go:build unix

package tempfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCreateModeFollowsUmask: the file has os.Create's mode, 0666 less the
// umask (os.CreateTemp's is 0600 whatever the umask), and its name the
// pattern's.
func TestCreateModeFollowsUmask(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ umask, want os.FileMode }{{0o022, 0o644}, {0o027, 0o640}, {0o077, 0o600}, {0, 0o666}} {
		old := syscall.Umask(int(c.umask))
		f, err := Create(dir, ".model.safetensors-*.tmp")
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		fi, err := os.Stat(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.want {
			t.Errorf("umask %03o: mode %03o, want %03o", c.umask, got, c.want)
		}
		if base := filepath.Base(f.Name()); filepath.Dir(f.Name()) != dir || !strings.HasPrefix(base, ".model.safetensors-") ||
			!strings.HasSuffix(base, ".tmp") || len(base) == len(".model.safetensors-.tmp") {
			t.Errorf("name %s: want %s/.model.safetensors-<random>.tmp", f.Name(), dir)
		}
	}
}

// TestCreateNames: each call makes a new file; a pattern without "*" gets
// the random part at its end; one with a separator is refused.
func TestCreateNames(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	for range 50 {
		f, err := Create(dir, "shard")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if seen[f.Name()] || !strings.HasPrefix(filepath.Base(f.Name()), "shard") {
			t.Fatalf("name %s: reused, or not shard<random>", f.Name())
		}
		seen[f.Name()] = true
	}
	if _, err := Create(dir, "a/b*"); err == nil {
		t.Error("pattern a/b*: no error")
	}
	if _, err := Create(filepath.Join(dir, "missing"), "x*"); !os.IsNotExist(err) {
		t.Errorf("missing directory: %v, want a not-exist error", err)
	}
}
