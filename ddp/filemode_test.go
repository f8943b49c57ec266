//go:build unix

package ddp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExportFileModes: model.safetensors and config.json get os.Create's
// mode, 0666 less the umask, so another user or a container can read an
// export (they were 0600 whatever the umask, os.CreateTemp's mode).
func TestExportFileModes(t *testing.T) {
	_, _, w := testGPT(t, "gpt", smallGPT)
	dir := t.TempDir()
	old := syscall.Umask(0o027)
	_, err := ExportHF(w, dir, HFExportOptions{})
	syscall.Umask(old)
	require.NoError(t, err)
	for _, name := range []string{hfModelFile, hfConfigFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "%s under umask 027", name)
	}
}

// A named pipe given as a checkpoint (generate --checkpoint, export,
// train --resume or --init-from) is refused at once: opening it would block
// until something wrote to it, and the command hung with no word. In a
// checkpoint directory it is skipped like a damaged checkpoint.
func TestReadWeightsOfANamedPipe(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "ckpt-000000001.safetensors")
	require.NoError(t, syscall.Mkfifo(pipe, 0o644))
	type result struct{ err error }
	read := func(path string) error {
		done := make(chan result, 1)
		go func() {
			_, err := ReadWeights(path)
			done <- result{err}
		}()
		select {
		case r := <-done:
			return r.err
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadWeights(%s) still waits after 10s", path)
			return nil
		}
	}
	assert.EqualError(t, read(pipe), "read weights "+pipe+": not a regular file (a named pipe): a checkpoint is a file train wrote")
	assert.EqualError(t, read(dir), "read weights: no intact checkpoint in "+dir+": "+pipe+": not a regular file (a named pipe): a checkpoint is a file train wrote")
}

// A Hugging Face directory whose model.safetensors (or config.json) is a
// named pipe is refused at once too (train --init-from DIR waited on it).
func TestReadHFOfANamedPipe(t *testing.T) {
	m, _, w := testGPT(t, "gpt", smallGPT)
	dir := t.TempDir()
	_, err := ExportHF(w, dir, HFExportOptions{})
	require.NoError(t, err)
	file := filepath.Join(dir, hfModelFile)
	require.NoError(t, os.Remove(file))
	require.NoError(t, syscall.Mkfifo(file, 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := readHF(dir, file, m.Name(), m.Params(), m.Describe())
		done <- err
	}()
	select {
	case err := <-done:
		assert.EqualError(t, err, file+": not a regular file (a named pipe)")
	case <-time.After(10 * time.Second):
		t.Fatal("readHF still waits on a named pipe after 10s")
	}
}
