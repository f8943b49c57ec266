package ddp

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stopAfter is a context that is done from its n+1-th Err call on: an
// export stopped at each point where it looks.
type stopAfter struct {
	context.Context
	n int
}

func (s *stopAfter) Err() error {
	if s.n == 0 {
		return context.Canceled
	}
	s.n--
	return nil
}

// An export stopped at any point (the export command on SIGINT) leaves
// the directory as it was: the previous export's two files, unchanged,
// and no temporary file; never a new model.safetensors beside the old
// config.json.
func TestHFExportStopped(t *testing.T) {
	_, _, w := testGPT(t, "gpt", smallGPT)
	dir := t.TempDir()
	_, err := ExportHFGPT2(w, dir, HFExportOptions{DType: "BF16"})
	require.NoError(t, err)
	files := func() map[string]string {
		got := map[string]string{}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			got[e.Name()] = string(b)
		}
		return got
	}
	before := files()
	require.Len(t, before, 2)
	for n := 0; ; n++ {
		require.Less(t, n, 100, "the export never finished")
		_, err := ExportHFContext(&stopAfter{context.Background(), n}, w, dir, HFExportOptions{DType: "F32", Overwrite: true})
		if err == nil {
			after := files()
			assert.Len(t, after, 2)
			assert.NotEqual(t, before[hfModelFile], after[hfModelFile], "the new export is in place")
			assert.NotEqual(t, before[hfConfigFile], after[hfConfigFile], "with its own config.json")
			break
		}
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, before, files(), "stopped at look %d: the directory changed", n+1)
	}
}

// A killed export's temporary files (SIGKILL leaves them, a model's size
// each) are removed by the next export into the directory.
func TestHFExportRemovesKilledTemps(t *testing.T) {
	_, _, w := testGPT(t, "gpt", smallGPT)
	dir := t.TempDir()
	stale := []string{filepath.Join(dir, "."+hfModelFile+"-123.tmp"), filepath.Join(dir, "."+hfConfigFile+"-456.tmp")}
	for _, p := range stale {
		require.NoError(t, os.WriteFile(p, []byte("half an export"), 0o644))
	}
	mine := filepath.Join(dir, ".notes-1.tmp") // not an export's
	require.NoError(t, os.WriteFile(mine, nil, 0o644))
	_, err := ExportHFGPT2(w, dir, HFExportOptions{})
	require.NoError(t, err)
	for _, p := range stale {
		assert.NoFileExists(t, p)
	}
	assert.FileExists(t, mine)
	assert.FileExists(t, filepath.Join(dir, hfModelFile))
}
