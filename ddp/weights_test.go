package ddp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A checkpoint directory whose newest checkpoints are damaged is read from
// its newest intact one, and says so: generate, export and train
// --init-from print the warning instead of quietly using older weights.
func TestReadWeightsSaysWhatItSkipped(t *testing.T) {
	m, arena, w := testGPT(t, "gpt", smallGPT)
	dir := filepath.Dir(w.Path)
	assert.Empty(t, w.Warning(), "a file named: nothing skipped")
	w, err := ReadWeights(dir)
	require.NoError(t, err)
	assert.Empty(t, w.Skipped)
	assert.Empty(t, w.Warning())

	good, err := os.ReadFile(w.Path)
	require.NoError(t, err)
	newer := filepath.Join(dir, "ckpt-000000009.safetensors")
	require.NoError(t, os.WriteFile(newer, good[:len(good)/2], 0o644))
	w, err = ReadWeights(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "ckpt-000000001.safetensors"), w.Path)
	require.Len(t, w.Skipped, 1)
	assert.Contains(t, w.Skipped[0], newer+": checkpoint file is corrupt: ")
	assert.Regexp(t, `^`+newer+`: checkpoint file is corrupt: .*; read the newest intact checkpoint instead, `+w.Path+` \(step 0\)$`, w.Warning())

	got, err := readInitWeights(dir, m)
	require.NoError(t, err)
	assert.Equal(t, arena, got.arena)
	assert.Equal(t, w.Warning(), got.warning)
	assert.Equal(t, w.Path+" (step 0 of "+w.Model+")", got.source)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "ckpt-000000010.safetensors"), nil, 0o644))
	w, err = ReadWeights(dir)
	require.NoError(t, err)
	assert.Len(t, w.Skipped, 2)
	assert.Regexp(t, `^`+filepath.Join(dir, "ckpt-000000010.safetensors")+`: checkpoint file is corrupt: 0 bytes, .*, and 1 more newer checkpoints fail their checks; read the newest intact one instead, `+w.Path+` \(step 0\)$`, w.Warning())
}

// A directory that holds a Hugging Face model.safetensors (an export, or
// one without its config.json) is not a checkpoint directory, and the
// error says what it is instead of only that no checkpoint is there.
func TestReadWeightsOfAHuggingFaceDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, hfModelFile), []byte("x"), 0o644))
	_, err := ReadWeights(dir)
	assert.EqualError(t, err, "read weights: no checkpoint in "+dir+": it holds model.safetensors, a Hugging Face model, not train's ckpt-<step>.safetensors files (train --init-from reads such a directory, with its config.json)")
	_, err = ReadWeights(t.TempDir())
	assert.ErrorContains(t, err, "train writes ckpt-<step>.safetensors files there with --checkpoint-dir")
}
