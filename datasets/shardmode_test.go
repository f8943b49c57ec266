//go:build unix

package datasets

import (
	"os"
	"syscall"
	"testing"
)

// TestShardFileMode: shards get os.Create's mode, 0666 less the umask, so
// another user or a container can read them (they were 0600 whatever the
// umask, os.CreateTemp's mode).
func TestShardFileMode(t *testing.T) {
	w, err := NewShardWriter(t.TempDir(), "doc", 5, 256)
	if err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o027)
	err = w.Write(false, int32s(1, 7))
	if err == nil {
		err = w.Write(true, int32s(1, 3))
	}
	paths, cerr := w.Close()
	syscall.Umask(old)
	if err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o640 {
			t.Errorf("%s: mode %03o under umask 027, want 640", p, got)
		}
	}
}
