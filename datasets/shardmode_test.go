//go:build unix

package datasets

import (
	"os"
	"path/filepath"
	"strings"
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
	wantMode640(t, paths)
}

// TestCachedFileMode: the text corpus a run builds and the IDX files it
// unpacks get os.Create's mode too (they were 0600, so a second user of a
// shared --data-dir or run directory could not read them).
func TestCachedFileMode(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, CorpusFile)
	src := writeText(t, dir, "src.txt", strings.Repeat("abc", 100))
	gzDir := writeDataset(t, true, nil)
	unpacked := filepath.Join(dir, "fashion-mnist")
	old := syscall.Umask(0o027)
	_, err := BuildCorpus(corpus, src, TextOptions{})
	if err == nil {
		_, err = Unpack("fashion-mnist", gzDir, unpacked)
	}
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{corpus}
	for _, f := range []string{trainImagesFile, trainLabelsFile, testImagesFile, testLabelsFile} {
		paths = append(paths, filepath.Join(unpacked, f))
	}
	wantMode640(t, paths)
}

// wantMode640 checks that each file was made with os.Create's mode under
// umask 027.
func wantMode640(t *testing.T, paths []string) {
	t.Helper()
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
