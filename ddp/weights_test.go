package ddp

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/models"
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

// TestVerifyCheckpointAsRead: verifyCheckpoint (LatestCheckpoint, the
// launcher's restarts), which streams the data through the hash, takes and
// refuses the same files as readCheckpointFile, which reads them whole,
// with the same metadata and errors: intact, cut at every kind of place, a
// header length too large, a data byte or a header byte changed, another
// safetensors file (a Hugging Face export), an empty file.
func TestVerifyCheckpointAsRead(t *testing.T) {
	_, _, w := testGPT(t, "gpt", smallGPT)
	good, err := os.ReadFile(w.Path)
	require.NoError(t, err)
	hl := int(binary.LittleEndian.Uint64(good[:8]))
	flip := func(at int) []byte {
		b := slices.Clone(good)
		b[at] ^= 0x40
		return b
	}
	huge := slices.Clone(good)
	binary.LittleEndian.PutUint64(huge, uint64(len(good)))
	hf := filepath.Join(t.TempDir(), "hf")
	_, err = ExportHF(w, hf, HFExportOptions{})
	require.NoError(t, err)
	export, err := os.ReadFile(filepath.Join(hf, hfModelFile))
	require.NoError(t, err)
	files := map[string][]byte{
		"intact": good, "empty": nil, "4 bytes": good[:4], "8 bytes": good[:8], "half the header": good[:8+hl/2],
		"the header alone": good[:8+hl], "half": good[:len(good)/2], "one byte short": good[:len(good)-1],
		"header length too large": huge, "a data byte changed": flip(len(good) - 3), "a header byte changed": flip(8 + hl/2),
		"a Hugging Face export": export,
	}
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, "ckpt-000000001.safetensors")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		_, wantMeta, wantErr := readCheckpointFile(p)
		meta, err := verifyCheckpoint(p)
		if wantErr != nil {
			require.Error(t, err, name)
			assert.Equal(t, wantErr.Error(), err.Error(), name)
			assert.Equal(t, errors.Is(wantErr, ErrCorrupt), errors.Is(err, ErrCorrupt), name)
			continue
		}
		require.NoError(t, err, name)
		assert.Equal(t, wantMeta, meta, name)
		assert.Equal(t, "intact", name)
	}
}

// TestWeightsReadFromTheFile: ReadWeights keeps no copy of the data (the
// optimizer state a checkpoint holds never takes memory); each tensor is
// read from the file when asked for, with the bits the checkpoint holds,
// and a checkpoint renamed over its name (as train saves) does not change
// what the Weights read (they hold the file they verified).
func TestWeightsReadFromTheFile(t *testing.T) {
	m, arena, w := testGPT(t, "gpt", smallGPT)
	require.Nil(t, w.f.Data)
	require.NotNil(t, w.f.src)
	// another checkpoint put in its place, as train's saves are: written
	// beside it, then renamed over its name
	other := slices.Clone(arena)
	for i := range other {
		other[i] += 1
	}
	tmp := w.Path + ".tmp"
	require.NoError(t, writeTestCheckpoint(tmp, m, other))
	require.NoError(t, os.Rename(tmp, w.Path))
	specs := m.Params()
	offsets, _ := models.Layout(specs)
	for i, s := range specs {
		got := make([]float32, s.Size())
		require.NoError(t, w.Read(s.Name, got))
		require.Equal(t, arena[offsets[i]:offsets[i]+s.Size()], got, s.Name)
	}
}

// readCheckpointFile reads a checkpoint file whole, parses it and verifies
// its metadata and the SHA-256 of its data: the reference that
// openCheckpoint, which streams the data, is tested against.
func readCheckpointFile(path string) (*stFile, ckptMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, ckptMeta{}, err
	}
	f, err := parseSafetensors(b)
	if err != nil {
		return nil, ckptMeta{}, err
	}
	meta, err := checkpointMeta(f)
	if err != nil {
		return nil, ckptMeta{}, err
	}
	h := sha256.Sum256(f.Data)
	if err := checkDataHash(f, h[:]); err != nil {
		return nil, ckptMeta{}, err
	}
	return f, meta, nil
}
