//go:build unix

package ddp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

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
