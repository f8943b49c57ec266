package ddp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/models"
)

// writeTestCheckpoint writes arena, m's parameters laid out by
// models.Layout, as a symddp checkpoint file at path (what a trainer
// writes, without optimizer state).
func writeTestCheckpoint(path string, m models.Model, arena []float32) error {
	specs := m.Params()
	offsets, _ := models.Layout(specs)
	var tensors []stTensor
	for i, s := range specs {
		tensors = append(tensors, stTensor{Name: s.Name, Shape: s.Shape, Data: arena[offsets[i] : offsets[i]+s.Size()]})
	}
	meta := ckptMeta{Format: ckptFormat, Model: m.Name(), Params: len(arena)}
	if d, ok := m.(ModelDescriber); ok {
		meta.ModelConfig = d.Describe()
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	sum := dataSHA256(tensors)
	var buf bytes.Buffer
	if err := writeSafetensors(&buf, map[string]string{"symddp": string(js), "sha256": hex.EncodeToString(sum[:])}, tensors); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// randomArena gives every parameter of m values of N(0, 0.5²): biases and
// gains too, so that a misplaced tensor shows.
func randomArena(m models.Model, seed uint64) []float32 {
	_, n := models.Layout(m.Params())
	rng := rand.New(rand.NewPCG(seed, 1))
	a := make([]float32, n)
	for i := range a {
		a[i] = float32(rng.NormFloat64() * 0.5)
	}
	return a
}

// testCheckpoint gives m random parameters and writes them as a
// checkpoint.
func testCheckpoint(t *testing.T, m models.Model) ([]float32, *Weights) {
	t.Helper()
	arena := randomArena(m, 7)
	path := filepath.Join(t.TempDir(), "ckpt-000000001.safetensors")
	require.NoError(t, writeTestCheckpoint(path, m, arena))
	w, err := ReadWeights(path)
	require.NoError(t, err)
	return arena, w
}

// testGPT is a small GPT of cfg with random parameters, and its checkpoint.
func testGPT(t *testing.T, name string, cfg models.GPTConfig) (*models.GPT, []float32, *Weights) {
	t.Helper()
	m, err := models.NewGPT(name, cfg)
	require.NoError(t, err)
	arena, w := testCheckpoint(t, m)
	return m, arena, w
}

var smallGPT = models.GPTConfig{Layers: 2, Heads: 2, Width: 8, Context: 8, Vocab: 256}

// Export to the Hugging Face layout and import again gives the same
// parameter bits: for a byte-level GPT; for one with GPT-2's padded
// vocabulary, whose 47 padding rows are not exported and come back zero
// (or are exported with Vocab 50304); and in bf16, each value rounded.
func TestHFRoundTrip(t *testing.T) {
	gpt2Vocab := models.GPTConfig{Layers: 1, Heads: 2, Width: 8, Context: 8, Vocab: models.GPT2.Vocab}
	for _, c := range []struct {
		name      string
		cfg       models.GPTConfig
		opts      HFExportOptions
		wantVocab int
	}{
		{"bytes", smallGPT, HFExportOptions{}, 256},
		{"gpt2-vocab", gpt2Vocab, HFExportOptions{}, models.GPT2Tokens},
		{"gpt2-vocab-all-rows", gpt2Vocab, HFExportOptions{Vocab: 50304}, 50304},
		{"bf16", smallGPT, HFExportOptions{DType: "BF16"}, 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, arena, w := testGPT(t, "gpt", c.cfg)
			dir := filepath.Join(t.TempDir(), "hf")
			got, err := ExportHFGPT2(w, dir, c.opts)
			require.NoError(t, err)
			assert.Equal(t, c.wantVocab, got.Vocab)
			assert.Equal(t, len(m.Params()), got.Tensors)

			want := slices.Clone(arena)
			for i := c.wantVocab * c.cfg.Width; i < c.cfg.Vocab*c.cfg.Width; i++ {
				want[i] = 0 // wte's rows above vocab_size
			}
			back := requireImport(t, dir, m, want, c.opts.DType)

			// the file is GPT2LMHeadModel's: prefixed names, Conv1D matrices, no head
			b, f := readHFFile(t, dir)
			C := c.cfg.Width
			wantDT := map[string]string{"": "F32", "BF16": "BF16"}[c.opts.DType]
			for name, shape := range map[string][]int{
				"transformer.wte.weight": {c.wantVocab, C}, "transformer.wpe.weight": {c.cfg.Context, C},
				"transformer.h.0.attn.c_attn.weight": {C, 3 * C}, "transformer.h.0.mlp.c_fc.weight": {C, 4 * C},
				"transformer.h.0.mlp.c_proj.weight": {4 * C, C}, "transformer.h.0.attn.c_attn.bias": {3 * C},
				"transformer.ln_f.weight": {C},
			} {
				assert.Equal(t, shape, f.Entries[name].Shape, name)
				assert.Equal(t, wantDT, f.Entries[name].DType, name)
			}
			assert.NotContains(t, f.Entries, "lm_head.weight")
			assert.Equal(t, map[string]string{"format": "pt"}, f.Meta)
			// read back as a checkpoint (generate, export): said to be none
			_, err = ReadWeights(filepath.Join(dir, hfModelFile))
			assert.ErrorIs(t, err, ErrNotCheckpoint)
			assert.NotErrorIs(t, err, ErrCorrupt)
			// c_fc's element (out o, in i) is at (i, o) in the file
			cfc := make([]float32, 4*C*C)
			require.NoError(t, f.floats("transformer.h.0.mlp.c_fc.weight", cfc))
			specs := m.Params()
			offsets, _ := models.Layout(specs)
			k := slices.IndexFunc(specs, func(s models.ParamSpec) bool { return s.Name == "h.0.mlp.c_fc.weight" })
			assert.Equal(t, want[offsets[k]+5*C+3], cfc[3*4*C+5])

			var cfg map[string]any
			cb, err := os.ReadFile(filepath.Join(dir, hfConfigFile))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(cb, &cfg))
			for k, v := range map[string]any{"model_type": "gpt2", "n_layer": float64(c.cfg.Layers), "n_head": 2.0, "n_embd": 8.0,
				"n_positions": 8.0, "n_ctx": 8.0, "vocab_size": float64(c.wantVocab), "activation_function": "gelu_new",
				"layer_norm_epsilon": 1e-5, "tie_word_embeddings": true, "n_inner": nil} {
				assert.Equal(t, v, cfg[k], k)
			}
			assert.Equal(t, []any{"GPT2LMHeadModel"}, cfg["architectures"])

			// exporting what was imported writes the same bytes
			if c.opts.Vocab == 0 && c.opts.DType == "" && c.cfg.Vocab == 256 {
				b2 := reexport(t, m, back, ExportHFGPT2, c.opts)
				require.True(t, bytes.Equal(b, b2), "re-exported model.safetensors differs")
			}
		})
	}
}

// requireImport imports dir into m and requires want's bits (rounded to
// bf16 first, in place, when dtype is BF16); it returns what it imported.
func requireImport(t *testing.T, dir string, m models.Model, want []float32, dtype string) []float32 {
	t.Helper()
	if dtype == "BF16" {
		for i, v := range want {
			want[i] = bf16ToF32(bf16FromF32(v))
		}
	}
	back, err := ReadInitWeights(dir, m)
	require.NoError(t, err)
	require.Equal(t, hashFloat32s(want), hashFloat32s(back), "parameter hash after export and import")
	require.Equal(t, want, back)
	return back
}

// readHFFile reads and parses dir's model.safetensors.
func readHFFile(t *testing.T, dir string) ([]byte, *stFile) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, hfModelFile))
	require.NoError(t, err)
	f, err := parseSafetensors(b)
	require.NoError(t, err)
	return b, f
}

// reexport writes arena as m's checkpoint, exports it into a new
// directory and returns that model.safetensors' bytes.
func reexport(t *testing.T, m models.Model, arena []float32, export func(*Weights, string, HFExportOptions) (HFExport, error), o HFExportOptions) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ckpt-000000002.safetensors")
	require.NoError(t, writeTestCheckpoint(path, m, arena))
	w, err := ReadWeights(path)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "hf")
	_, err = export(w, dir, o)
	require.NoError(t, err)
	b, _ := readHFFile(t, dir)
	return b
}

// replaceTensor is rewriteHF's tensors function that passes tensor name
// through f (which drops it by returning a tensor without a name).
func replaceTensor(name string, f func(stTensor) stTensor) func([]stTensor) []stTensor {
	return func(ts []stTensor) []stTensor {
		var out []stTensor
		for _, s := range ts {
			if s.Name == name {
				if s = f(s); s.Name == "" {
					continue
				}
			}
			out = append(out, s)
		}
		return out
	}
}

// hfFixture exports a small GPT's checkpoint and returns the model, the
// Hugging Face directory and the arena that imports from it.
func hfFixture(t *testing.T) (*models.GPT, string, []float32) {
	t.Helper()
	m, _, w := testGPT(t, "gpt", smallGPT)
	dir := filepath.Join(t.TempDir(), "hf")
	_, err := ExportHFGPT2(w, dir, HFExportOptions{})
	require.NoError(t, err)
	arena, err := ReadInitWeights(dir, m)
	require.NoError(t, err)
	return m, dir, arena
}

// rewriteHF copies the Hugging Face directory src to a new one, passing
// its tensors (raw, in file order) through tensors and its config through
// config (either may be nil), and returns the new directory.
func rewriteHF(t *testing.T, src string, tensors func([]stTensor) []stTensor, config func(map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(src, hfModelFile))
	require.NoError(t, err)
	f, err := parseSafetensors(b)
	require.NoError(t, err)
	var ts []stTensor
	for name, e := range f.Entries {
		ts = append(ts, stTensor{Name: name, Shape: e.Shape, DType: e.DType, Raw: f.Data[e.DataOffsets[0]:e.DataOffsets[1]]})
	}
	slices.SortFunc(ts, func(a, b stTensor) int {
		return int(f.Entries[a.Name].DataOffsets[0] - f.Entries[b.Name].DataOffsets[0])
	})
	if tensors != nil {
		ts = tensors(ts)
	}
	var cfg map[string]any
	cb, err := os.ReadFile(filepath.Join(src, hfConfigFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(cb, &cfg))
	if config != nil {
		config(cfg)
	}
	dst := t.TempDir()
	var buf bytes.Buffer
	require.NoError(t, writeSafetensors(&buf, f.Meta, ts))
	require.NoError(t, os.WriteFile(filepath.Join(dst, hfModelFile), buf.Bytes(), 0o644))
	cb, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dst, hfConfigFile), cb, 0o644))
	return dst
}

// decoded returns tensor ts[i] re-encoded as dtype.
func decoded(t *testing.T, s stTensor, dtype string) stTensor {
	t.Helper()
	f := &stFile{Entries: map[string]stEntry{s.Name: {DType: s.DType, Shape: s.Shape, DataOffsets: []int64{0, int64(len(s.Raw))}}}, Data: s.Raw}
	vals := make([]float32, shapeSize(s.Shape))
	require.NoError(t, f.floats(s.Name, vals))
	return stTensor{Name: s.Name, Shape: s.Shape, Data: vals, DType: dtype}
}

// Files as other tools write them import too: names without the
// "transformer." prefix, an lm_head.weight equal to wte, the attention
// mask buffers, F16 and BF16 tensors, more positions than the model's
// context (wpe's first rows are used).
func TestHFImportVariants(t *testing.T) {
	m, dir, arena := hfFixture(t)
	bare := rewriteHF(t, dir, func(ts []stTensor) []stTensor {
		var out []stTensor
		for _, s := range ts {
			s.Name = s.Name[len(hfPrefix):]
			out = append(out, s)
			if s.Name == "wte.weight" {
				head := s
				head.Name = "lm_head.weight"
				out = append(out, head)
			}
			if s.Name == "h.1.attn.c_attn.bias" {
				out = append(out, stTensor{Name: "h.1.attn.bias", Shape: []int{1, 1, 8, 8}, DType: "BOOL", Raw: make([]byte, 64)},
					stTensor{Name: "h.1.attn.masked_bias", Shape: []int{}, DType: "F32", Data: []float32{-1e4}})
			}
		}
		return out
	}, nil)
	got, err := ReadInitWeights(bare, m)
	require.NoError(t, err)
	assert.Equal(t, arena, got)
	// the directory may be named by either of its files
	for _, f := range []string{hfConfigFile, hfModelFile} {
		got, err := ReadInitWeights(filepath.Join(bare, f), m)
		require.NoError(t, err, f)
		assert.Equal(t, arena, got, f)
	}

	for _, dt := range []string{"F16", "BF16"} {
		half := rewriteHF(t, dir, func(ts []stTensor) []stTensor {
			for i := range ts {
				ts[i] = decoded(t, ts[i], dt)
			}
			return ts
		}, nil)
		got, err := ReadInitWeights(half, m)
		require.NoError(t, err, dt)
		for i, v := range arena {
			want := bf16ToF32(bf16FromF32(v))
			if dt == "F16" {
				want = f16ToF32(f16FromF32(v))
			}
			require.Equal(t, want, got[i], "%s: element %d", dt, i)
		}
	}

	// a model of context 4 takes the first 4 of the file's 8 positions
	short, err := models.NewGPT("gpt", models.GPTConfig{Layers: 2, Heads: 2, Width: 8, Context: 4, Vocab: 256})
	require.NoError(t, err)
	got, err = ReadInitWeights(dir, short)
	require.NoError(t, err)
	C, V := 8, 256
	assert.Equal(t, arena[:V*C+4*C], got[:V*C+4*C], "wte and wpe's first 4 rows")
	assert.Equal(t, arena[V*C+8*C:], got[V*C+4*C:], "the blocks")
}

// Each fault in a Hugging Face directory is one line naming the file and
// the tensor or the config.json field, with both values where sizes
// differ.
func TestHFImportErrors(t *testing.T) {
	m, dir, _ := hfFixture(t)
	file := func(d string) string { return filepath.Join(d, hfModelFile) }
	replace := replaceTensor
	drop := func(stTensor) stTensor { return stTensor{} }
	for _, c := range []struct {
		name    string
		tensors func([]stTensor) []stTensor
		config  func(map[string]any)
		want    func(d string) string
	}{
		{"missing tensor", replace("transformer.h.1.mlp.c_fc.weight", drop), nil,
			func(d string) string { return file(d) + `: tensor "transformer.h.1.mlp.c_fc.weight" is missing` }},
		{"Linear layout", replace("transformer.h.0.attn.c_attn.weight", func(s stTensor) stTensor { s.Shape = []int{24, 8}; return s }), nil,
			func(d string) string {
				return file(d) + `: tensor "transformer.h.0.attn.c_attn.weight" has shape [24 8], want [8 24]`
			}},
		{"int64", replace("transformer.ln_f.weight", func(s stTensor) stTensor {
			return stTensor{Name: s.Name, Shape: s.Shape, DType: "I64", Raw: make([]byte, 64)}
		}), nil, func(d string) string {
			return file(d) + `: tensor "transformer.ln_f.weight" is I64, want F32, BF16 or F16`
		}},
		{"NaN", replace("transformer.h.0.ln_2.bias", func(s stTensor) stTensor {
			s = decoded(t, s, "F32")
			s.Data[3] = float32(math.NaN())
			return s
		}), nil, func(d string) string { return file(d) + `: tensor "transformer.h.0.ln_2.bias" holds NaN or Inf` }},
		{"extra layer", func(ts []stTensor) []stTensor {
			return append(ts, stTensor{Name: "transformer.h.2.ln_1.weight", Shape: []int{8}, Data: make([]float32, 8)})
		}, nil, func(d string) string {
			return file(d) + `: tensor "transformer.h.2.ln_1.weight" is not a parameter of a GPT-2 of 2 layers`
		}},
		{"untied head", func(ts []stTensor) []stTensor {
			return append(ts, stTensor{Name: "lm_head.weight", Shape: []int{256, 8}, Data: make([]float32, 256*8)})
		}, nil, func(d string) string {
			return file(d) + `: tensor "lm_head.weight" differs from "transformer.wte.weight": symddp's GPT ties its head to wte`
		}},
		{"heads", nil, func(c map[string]any) { c["n_head"] = 4 },
			func(d string) string { return d + ": config.json has n_head 4, the model 2 (--heads 4)" }},
		{"layers", nil, func(c map[string]any) { c["n_layer"] = 12 },
			func(d string) string { return d + ": config.json has n_layer 12, the model 2 (--layers 12)" }},
		{"vocabulary", nil, func(c map[string]any) { c["vocab_size"] = 300 }, func(d string) string {
			return d + ": config.json has vocab_size 300, more than the model's vocabulary of 256 (--vocab 300 or more)"
		}},
		{"positions", nil, func(c map[string]any) { c["n_positions"] = 4 }, func(d string) string {
			return d + ": config.json has n_positions 4, fewer than the model's context of 8 (--context 4 or less)"
		}},
		{"wte rows", nil, func(c map[string]any) { c["vocab_size"] = 250 }, func(d string) string {
			return file(d) + `: tensor "transformer.wte.weight" has shape [256 8], want [250 8]`
		}},
		{"activation", nil, func(c map[string]any) { c["activation_function"] = "relu" }, func(d string) string {
			return d + `: config.json has activation_function "relu": symddp's GPT computes GELU's tanh approximation (gelu_new, gelu_pytorch_tanh, gelu_fast)`
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := rewriteHF(t, dir, c.tensors, c.config)
			_, err := ReadInitWeights(d, m)
			require.Error(t, err)
			assert.Equal(t, c.want(d), err.Error())
		})
	}

	require.NoError(t, os.Remove(filepath.Join(dir, hfModelFile)))
	_, err := ReadInitWeights(dir, m)
	assert.EqualError(t, err, dir+": no model.safetensors beside config.json (sharded files and pytorch_model.bin are not read: save the model as one safetensors file)")

	mlp, err := models.New("mlp", models.Config{})
	require.NoError(t, err)
	_, err = ReadInitWeights(dir, mlp)
	assert.EqualError(t, err, dir+": Hugging Face GPT-2 weights load into GPT models only, and model mlp is not one: it records no sizes (not a GPT)")
	llama, err := models.NewLlama("llama", models.LlamaTiny)
	require.NoError(t, err)
	_, err = ReadInitWeights(dir, llama)
	assert.EqualError(t, err, dir+": Hugging Face GPT-2 weights load into GPT models only, and model llama is a Llama: pick a GPT model with --model (and its sizes as config.json gives them)")
}

// A symddp checkpoint is a source too, weights only, of any model with the
// same parameters; another head count is an error naming both.
func TestInitFromCheckpoint(t *testing.T) {
	m, arena, w := testGPT(t, "gpt2", smallGPT)
	other, err := models.NewGPT("gpt", smallGPT)
	require.NoError(t, err)
	got, err := ReadInitWeights(w.Path, other)
	require.NoError(t, err)
	assert.Equal(t, arena, got)
	got, err = ReadInitWeights(filepath.Dir(w.Path), m)
	require.NoError(t, err)
	assert.Equal(t, arena, got)

	heads, err := models.NewGPT("gpt", models.GPTConfig{Layers: 2, Heads: 4, Width: 8, Context: 8, Vocab: 256})
	require.NoError(t, err)
	_, err = ReadInitWeights(w.Path, heads)
	assert.EqualError(t, err, w.Path+": the checkpoint's model has heads 2, this model 4 (pass --heads 2)")
	wide, err := models.NewGPT("gpt", models.GPTConfig{Layers: 2, Heads: 2, Width: 8, Context: 16, Vocab: 256})
	require.NoError(t, err)
	_, err = ReadInitWeights(w.Path, wide)
	assert.EqualError(t, err, w.Path+": the checkpoint's model has context 8, this model 16 (pass --context 8)")
	mlp, err := models.New("mlp", models.Config{})
	require.NoError(t, err)
	_, err = ReadInitWeights(w.Path, mlp)
	assert.EqualError(t, err, w.Path+`: tensor "fc1.weight" is missing (the checkpoint holds model "gpt2")`)
}

// The hint of a size mismatch names train's flag (hyphens, not the
// description's underscores), or for the tie what the model must be.
func TestSizeHint(t *testing.T) {
	assert.Equal(t, "pass --kv-heads 2", sizeHint("kv_heads", 2))
	assert.Equal(t, "pass --rope-theta 500000", sizeHint("rope_theta", 500000))
	assert.Equal(t, "pass --ffn-hidden 384", sizeHint("ffn_hidden", 384))
	assert.Equal(t, "build a model whose output head is its token embedding (tied)", sizeHint("tied_embeddings", 1))
	assert.Equal(t, "build a model whose output head is a matrix of its own (untied)", sizeHint("tied_embeddings", 0))
}

// Export refuses a checkpoint of another model, a directory that already
// holds an export (unless Overwrite), and a dtype it does not write.
func TestHFExportErrors(t *testing.T) {
	_, _, w := testGPT(t, "gpt", smallGPT)
	mlp, err := models.New("mlp", models.Config{Input: []int{4}, Hidden: []int{3}, Classes: 2})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ckpt-000000001.safetensors")
	require.NoError(t, writeTestCheckpoint(path, mlp, randomArena(mlp, 1)))
	wm, err := ReadWeights(path)
	require.NoError(t, err)
	_, err = ExportHFGPT2(wm, t.TempDir(), HFExportOptions{})
	assert.EqualError(t, err, path+` holds model "mlp", which is not a GPT (it records no sizes): only GPT checkpoints export to the Hugging Face GPT-2 layout`)

	dir := t.TempDir()
	_, err = ExportHFGPT2(w, dir, HFExportOptions{DType: "F8"})
	assert.EqualError(t, err, `dtype "F8": want F32 or BF16`)
	_, err = ExportHFGPT2(w, dir, HFExportOptions{Vocab: 300})
	assert.EqualError(t, err, "vocabulary 300: the model has 256 rows in wte")
	_, err = ExportHFGPT2(w, dir, HFExportOptions{})
	require.NoError(t, err)
	_, err = ExportHFGPT2(w, dir, HFExportOptions{})
	assert.EqualError(t, err, dir+" already holds model.safetensors (overwrite it, or write to another directory)")
	var exists *ExportExistsError
	require.ErrorAs(t, err, &exists, "a command tells it apart, to name its flag")
	assert.Equal(t, ExportExistsError{Dir: dir, File: hfModelFile}, *exists)
	_, err = ExportHFGPT2(w, dir, HFExportOptions{Overwrite: true})
	require.NoError(t, err)
	left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	assert.Empty(t, left, "temporary files left")
	_, err = ExportHFGPT2(w, filepath.Join(dir, hfConfigFile), HFExportOptions{})
	assert.EqualError(t, err, filepath.Join(dir, hfConfigFile)+" is a file, not a directory")
}
