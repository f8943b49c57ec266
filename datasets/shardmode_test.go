//go:build unix

package datasets

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestLoadShardsNotARegularFile checks that a glob that matches a named
// pipe or a directory says so at once: opening the pipe used to block
// until something wrote to it (train hung with no word), and mapping the
// directory failed with "no such device".
func TestLoadShardsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"a.bin": shard16(1, 2, 3), "v.bin": shard16(1, 2, 3)})
	if err := syscall.Mkfifo(filepath.Join(dir, "b.bin"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "c.bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ glob, want string }{
		{"[ab].bin", "load shards: read DIR/b.bin: not a regular file (a named pipe)"},
		{"[ac].bin", "load shards: read DIR/c.bin: not a regular file (a directory)"},
	} {
		done := make(chan error, 1)
		go func() {
			_, _, err := LoadShards(filepath.Join(dir, c.glob), filepath.Join(dir, "v.bin"), 2, 50257)
			done <- err
		}()
		select {
		case err := <-done:
			if want := strings.ReplaceAll(c.want, "DIR", dir); err == nil || err.Error() != want {
				t.Errorf("glob %s: error\n  %v\nwant\n  %s", c.glob, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("glob %s: LoadShards still waits after 10s", c.glob)
		}
	}
}
