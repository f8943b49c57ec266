package ddp

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
	"github.com/symddp/symddp/internal/regfile"
	"github.com/symddp/symddp/internal/tempfile"
	"github.com/symddp/symddp/optim"
)

// A checkpoint is one safetensors file, ckpt-<step>.safetensors: the
// model's parameters under their own names, the optimizer state under
// "optimizer.<state>.<parameter>", and the training state as JSON metadata
// (key "symddp") with a SHA-256 of the data section (key "sha256").
// PE 0 writes it to a temporary file, fsyncs it, renames it into place and
// fsyncs the directory, between two barriers; a job killed during a save
// leaves the previous checkpoint as it was.

const (
	ckptFormat = "symddp-checkpoint/1"
	ckptPrefix = "ckpt-"
	ckptSuffix = ".safetensors"
	tmpPrefix  = ".ckpt-"
)

// ckptMeta is the training state of a checkpoint.
type ckptMeta struct {
	Format      string      `json:"format"`
	Model       string      `json:"model"`
	Params      int         `json:"params"`
	Step        int         `json:"step"`
	Epoch       int         `json:"epoch"`
	StepInEpoch int         `json:"step_in_epoch"`
	GlobalBatch int         `json:"global_batch"`
	Accumulate  int         `json:"accumulate"`
	NPEs        int         `json:"npes"`
	Seed        uint64      `json:"seed"`
	Optimizer   optim.Hyper `json:"optimizer"`
	// NextLR is the learning rate the writing run's schedule gives the
	// step after Step, so that a resume under another schedule (another
	// --max-steps, --epochs, --lr or warm-up) can say where it departs;
	// nil in checkpoints written before it was recorded even where it is 0
	// (the end of a cosine schedule).
	NextLR *float32 `json:"next_lr,omitempty"`
	// ModelConfig is what a model that describes itself (ModelDescriber)
	// says of its sizes, so that a checkpoint can be rebuilt without the
	// run's flags (the generate command).
	ModelConfig map[string]int `json:"model_config,omitempty"`
	// Recipe is Options.Recipe: how the writing run was configured.
	Recipe map[string]any `json:"recipe,omitempty"`
}

// ModelDescriber is implemented by models whose sizes cannot all be read
// from their parameters' shapes (a GPT's heads): checkpoints record them.
type ModelDescriber interface {
	Describe() map[string]int
}

// DeviceOptimizerState is implemented by device engines (see
// DeviceUpdater) to expose the optimizer state they keep, one tensor per
// state slot over the whole arena (or over this PE's shard of it, with the
// sharded device update), in Optimizer.StateNames() order.
type DeviceOptimizerState interface {
	// OptimizerState returns the state tensors (nil before the first
	// update or AllocOptimizerState).
	OptimizerState() []compute.Tensor
	// AllocOptimizerState allocates the state of o over n elements once,
	// for a resume to fill before the first update, and returns it.
	AllocOptimizerState(o optim.Optimizer, n int) ([]compute.Tensor, error)
}

// checkpointBytesHook, when set (by tests), is called as the data section
// is written with the number of data bytes written so far.
var checkpointBytesHook func(written int64)

// checkpoint saves the training state after t.step steps (collective).
func (t *Trainer) checkpoint(epoch, stepInEpoch int) error {
	dir := t.opts.Checkpoint.Dir
	if dir == "" {
		return nil
	}
	if err := t.c.Barrier(); err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", t.step, err)
	}
	if err := t.gatherState(); err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", t.step, err)
	}
	var path string
	var werr error
	if t.c.MyPE() == 0 {
		path, werr = t.writeCheckpoint(epoch, stepInEpoch)
	}
	// PE 0 tells everyone how it went; the broadcast is the closing barrier.
	msg := ctlMsg{OK: werr == nil, Path: path}
	if werr != nil {
		msg.Err = werr.Error()
	}
	got, err := t.shareFromRoot(msg)
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", t.step, err)
	}
	if werr != nil {
		return sharedFrom(0, fmt.Errorf("%w at step %d: %w", ErrCheckpointSave, t.step, werr))
	}
	if !got.OK { // the same words as PE 0's error
		return sharedFrom(0, fmt.Errorf("%w at step %d: %s", ErrCheckpointSave, t.step, got.Err))
	}
	if h := t.opts.Hooks.OnCheckpoint; h != nil {
		h(got.Path, t.step)
	}
	return nil
}

// ErrCheckpointSave is wrapped by the error of a checkpoint that PE 0 could
// not write (every PE gets it). The job is intact: Fit goes on to the end
// (see Fit).
var ErrCheckpointSave = errors.New("checkpoint not saved")

// writeCheckpoint writes the checkpoint file on PE 0 and returns its path.
func (t *Trainer) writeCheckpoint(epoch, stepInEpoch int) (string, error) {
	dir := t.opts.Checkpoint.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint directory: %w", err)
	}
	removeTemps(dir, tmpPrefix+"*.tmp")
	params := t.Params()
	if !hostloops.AllFinite(params) {
		return "", fmt.Errorf("refusing to write a checkpoint: the parameters hold NaN or Inf")
	}
	state, err := t.stateHost()
	if err != nil {
		return "", err
	}
	tensors := t.ckptTensors(params, state)
	nextLR := t.opts.lr(t.step + 1)
	meta := ckptMeta{Format: ckptFormat, Model: t.m.Name(), Params: t.n, Step: t.step, Epoch: epoch,
		StepInEpoch: stepInEpoch, GlobalBatch: t.opts.GlobalBatch, Accumulate: t.opts.Accumulate,
		NPEs: t.c.NPEs(), Seed: t.opts.Seed, Optimizer: t.o.Hyper(), NextLR: &nextLR, Recipe: t.opts.Recipe}
	if d, ok := t.m.(ModelDescriber); ok {
		meta.ModelConfig = d.Describe()
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	sum := dataSHA256(tensors)
	md := map[string]string{"symddp": string(js), "sha256": hex.EncodeToString(sum[:]), "format": "pt"}

	f, err := tempfile.Create(dir, tmpPrefix+"*.tmp") // os.Create's mode: readable as the user's other files
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	bw := bufio.NewWriterSize(&countingWriter{w: f}, 1<<20)
	if err := writeSafetensors(bw, md, tensors); err != nil {
		f.Close()
		return "", fmt.Errorf("write checkpoint %s: %w", tmp, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return "", fmt.Errorf("write checkpoint %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("sync checkpoint %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close checkpoint %s: %w", tmp, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s%09d%s", ckptPrefix, t.step, ckptSuffix))
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	t.prune(dir)
	return path, nil
}

// ckptTensors names the parameters and the optimizer state per parameter.
func (t *Trainer) ckptTensors(params []float32, state [][]float32) []stTensor {
	var out []stTensor
	for i, s := range t.specs {
		out = append(out, stTensor{Name: s.Name, Shape: s.Shape, Data: params[t.offsets[i] : t.offsets[i]+s.Size()]})
	}
	for k, name := range t.o.StateNames() {
		for i, s := range t.specs {
			out = append(out, stTensor{Name: "optimizer." + name + "." + s.Name, Shape: s.Shape,
				Data: state[k][t.offsets[i] : t.offsets[i]+s.Size()]})
		}
	}
	return out
}

// gatherState assembles the whole optimizer state in every PE's copy when
// the update is sharded (each PE keeps only its shard current).
func (t *Trainer) gatherState() error {
	if t.dshard != nil {
		return t.dshard.gatherState(t)
	}
	if t.sharder == nil {
		return nil
	}
	for k := range t.stateSlots {
		if err := t.sharder.AllGather(t.stateBuf, k*t.stateStride, t.n); err != nil {
			return fmt.Errorf("gather optimizer state: %w", err)
		}
	}
	return nil
}

// stateHost returns the optimizer state as host slices (copies for device
// engines).
func (t *Trainer) stateHost() ([][]float32, error) {
	if t.o.Slots() == 0 {
		return nil, nil
	}
	if t.pArena.Host != nil {
		return t.stateSlots, nil
	}
	if t.dshard != nil {
		return t.dshard.state, nil // gathered by gatherState
	}
	ds, ok := t.e.(DeviceOptimizerState)
	if !ok {
		return nil, fmt.Errorf("engine %s does not expose its optimizer state for checkpoints", t.e.Name())
	}
	ts := ds.OptimizerState()
	if len(ts) != t.o.Slots() {
		return nil, fmt.Errorf("engine %s holds %d optimizer state tensors, optimizer %s has %d", t.e.Name(), len(ts), t.o.Name(), t.o.Slots())
	}
	out := make([][]float32, len(ts))
	for i, ten := range ts {
		out[i] = make([]float32, t.n)
		t.e.ReadTensor(out[i], ten)
	}
	return out, nil
}

// dataSHA256 hashes the data section writeSafetensors will write.
func dataSHA256(tensors []stTensor) [32]byte {
	h := sha256.New()
	buf := make([]byte, 0, 1<<16)
	for _, t := range tensors {
		for _, v := range t.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) == cap(buf) {
				h.Write(buf)
				buf = buf[:0]
			}
		}
	}
	h.Write(buf)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// countingWriter reports progress to checkpointBytesHook.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if checkpointBytesHook != nil {
		checkpointBytesHook(c.n)
	}
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeTemps deletes the files of dir that match the patterns: the
// temporary files of interrupted saves (or exports).
func removeTemps(dir string, patterns ...string) {
	for _, pattern := range patterns {
		tmps, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range tmps {
			os.Remove(p)
		}
	}
}

// listCheckpoints returns the checkpoint files of dir, newest step first.
func listCheckpoints(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type ck struct {
		path string
		step int
	}
	var cks []ck
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ckptPrefix) || !strings.HasSuffix(name, ckptSuffix) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, ckptPrefix), ckptSuffix))
		if err != nil {
			continue
		}
		cks = append(cks, ck{filepath.Join(dir, name), n})
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].step > cks[j].step })
	out := make([]string, len(cks))
	for i, c := range cks {
		out[i] = c.path
	}
	return out, nil
}

// prune keeps the newest Keep checkpoints.
func (t *Trainer) prune(dir string) {
	paths, err := listCheckpoints(dir)
	if err != nil {
		return
	}
	for _, p := range paths[min(len(paths), t.opts.Checkpoint.Keep):] {
		os.Remove(p)
	}
}

// loadedCheckpoint is a verified checkpoint, ready to install: its
// parameters read, its optimizer state left in the file (held open) until
// each slot is installed, so that resuming holds one arena's worth of the
// checkpoint in memory at a time, not the whole file and a copy.
type loadedCheckpoint struct {
	path   string
	meta   ckptMeta
	params []float32 // then the buffer each state slot is read into
	f      *stFile   // reads from fh
	fh     *os.File
}

// stateReadHook, when set (by tests), is called before PE 0 reads the
// optimizer state slot k of the checkpoint it resumes from.
var stateReadHook func(path string, k int)

// loadCheckpoint reads and verifies path against this trainer's model,
// optimizer and options: the SHA-256 of its data, its parameters, and the
// names, types and sizes of its optimizer state (read later, readState).
func (t *Trainer) loadCheckpoint(path string) (_ *loadedCheckpoint, err error) {
	f, fh, meta, err := openCheckpoint(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			fh.Close()
			err = fmt.Errorf("load checkpoint %s: %w", path, err)
		}
	}()
	if err := t.compatible(meta, f); err != nil {
		return nil, err
	}
	lc := &loadedCheckpoint{path: path, meta: meta, params: make([]float32, t.n), f: f, fh: fh}
	for i, s := range t.specs {
		if err := f.float32s(s.Name, lc.params[t.offsets[i]:t.offsets[i]+s.Size()]); err != nil {
			return nil, err
		}
	}
	if !hostloops.AllFinite(lc.params) {
		return nil, fmt.Errorf("%w: the parameters hold NaN or Inf", ErrCorrupt)
	}
	for _, name := range t.o.StateNames() {
		for _, s := range t.specs {
			if err := f.checkFloat32s("optimizer."+name+"."+s.Name, s.Size()); err != nil {
				return nil, err
			}
		}
	}
	return lc, nil
}

// readState reads optimizer state slot k into lc.params (the parameters
// must be installed by then); errors name the file.
func (lc *loadedCheckpoint) readState(t *Trainer, k int) error {
	if stateReadHook != nil {
		stateReadHook(lc.path, k)
	}
	name := t.o.StateNames()[k]
	for i, s := range t.specs {
		if err := lc.f.float32s("optimizer."+name+"."+s.Name, lc.params[t.offsets[i]:t.offsets[i]+s.Size()]); err != nil {
			return fmt.Errorf("load checkpoint %s: %w", lc.path, err)
		}
	}
	return nil
}

// close closes the checkpoint's file; a nil lc is none.
func (lc *loadedCheckpoint) close() {
	if lc != nil {
		lc.fh.Close()
	}
}

// ErrMismatch is wrapped by the errors of a checkpoint that belongs to
// another model, optimizer or run configuration.
var ErrMismatch = errors.New("checkpoint does not match this run")

// compatible checks a checkpoint's model, tensors and run settings.
func (t *Trainer) compatible(meta ckptMeta, f *stFile) error {
	if meta.Model != t.m.Name() {
		return fmt.Errorf("%w: it holds model %q, this run builds %q", ErrMismatch, meta.Model, t.m.Name())
	}
	if d, ok := t.m.(ModelDescriber); ok && meta.ModelConfig != nil {
		now := d.Describe()
		for _, k := range slices.Sorted(maps.Keys(now)) {
			if was, ok := meta.ModelConfig[k]; ok && was != now[k] {
				return fmt.Errorf("%w: the checkpoint's model has %s %d, this run's %d (%s to resume)", ErrMismatch, k, was, now[k], sizeHint(k, was))
			}
		}
	}
	for _, s := range t.specs {
		e, ok := f.Entries[s.Name]
		if !ok {
			return fmt.Errorf("%w: tensor %s (shape %v) is not in the checkpoint", ErrMismatch, s.Name, s.Shape)
		}
		if !slices.Equal(e.Shape, s.Shape) {
			return fmt.Errorf("%w: tensor %s has shape %v in the checkpoint and %v in the model", ErrMismatch, s.Name, e.Shape, s.Shape)
		}
	}
	if meta.Params != t.n {
		return fmt.Errorf("%w: %d parameters in the checkpoint, %d in the model", ErrMismatch, meta.Params, t.n)
	}
	if meta.Optimizer.Kind != t.o.Hyper().Kind || len(t.o.StateNames()) != countState(f) {
		return fmt.Errorf("%w: it was written by optimizer %s, this run uses %s", ErrMismatch, meta.Optimizer.Kind, t.o.Hyper().Kind)
	}
	if meta.GlobalBatch != t.opts.GlobalBatch {
		return fmt.Errorf("%w: it was written with global batch %d, this run uses %d (pass the same batch size to resume)",
			ErrMismatch, meta.GlobalBatch, t.opts.GlobalBatch)
	}
	if meta.Seed != t.opts.Seed {
		return fmt.Errorf("%w: it was written with seed %d, this run uses %d (pass the same seed to resume)", ErrMismatch, meta.Seed, t.opts.Seed)
	}
	return nil
}

func countState(f *stFile) int {
	names := map[string]bool{}
	for n := range f.Entries {
		if rest, ok := strings.CutPrefix(n, "optimizer."); ok {
			if k, _, ok := strings.Cut(rest, "."); ok {
				names[k] = true
			}
		}
	}
	return len(names)
}

// ErrCheckpointDirInUse is wrapped by the error of a run that starts afresh
// in a checkpoint directory that already holds checkpoints: its own would
// overwrite theirs at the same steps, and keeping the newest steps
// (CheckpointOptions.Keep) would delete its own in favour of theirs.
var ErrCheckpointDirInUse = errors.New("it already holds checkpoints")

// CheckFreshCheckpointDir returns an error wrapping ErrCheckpointDirInUse
// when dir holds checkpoint files, nil when it holds none or does not exist.
// A program calls it before Launch to refuse a fresh start once, before any
// PE starts. The error says what dir holds but does not name dir nor how to
// resume: the caller adds both, as Fit does ("checkpoint directory DIR: ...:
// resume from its newest (Checkpoint.Resume "latest") or use another
// directory") and train does for --checkpoint-dir and --resume latest.
func CheckFreshCheckpointDir(dir string) error {
	paths, err := listCheckpoints(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(paths) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoints in %s: %w", dir, err)
	}
	return fmt.Errorf("%w (%d, the newest %s), which a run started afresh would overwrite and prune",
		ErrCheckpointDirInUse, len(paths), filepath.Base(paths[0]))
}

// LatestCheckpoint returns the newest checkpoint in dir that is intact (its
// data matches its SHA-256) and the step it was written at; path is ""
// when dir holds none (or does not exist). Whether it fits a model is
// checked when it is loaded (Options.Checkpoint.Resume).
func LatestCheckpoint(dir string) (path string, step int, err error) {
	paths, err := listCheckpoints(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("checkpoints in %s: %w", dir, err)
	}
	for _, p := range paths {
		if meta, err := verifyCheckpoint(p); err == nil {
			return p, meta.Step, nil
		}
	}
	return "", 0, nil
}

// verifyCheckpoint checks path's metadata and the SHA-256 of its data
// (openCheckpoint) without keeping the file open.
func verifyCheckpoint(path string) (ckptMeta, error) {
	_, fh, meta, err := openCheckpoint(path)
	if fh != nil {
		fh.Close()
	}
	return meta, err
}

// openCheckpoint checks path's header, its symddp metadata and the SHA-256
// of its data (errors wrap ErrNotCheckpoint or ErrCorrupt and do not name
// the path), reading the data through the hash rather than into memory (a
// checkpoint holds the optimizer state too: 12 bytes a parameter with
// AdamW); it returns the parsed header, which reads its tensors from the
// file (stFile.src), and the open file, or nil with the error.
func openCheckpoint(path string) (_ *stFile, _ *os.File, _ ckptMeta, err error) {
	// Opening a named pipe would block until something writes to it: a
	// checkpoint is a regular file. A path that cannot be stat'ed is left
	// to the open to report.
	if err := regfile.Check(path); err != nil {
		return nil, nil, ckptMeta{}, fmt.Errorf("%w: a checkpoint is a file train wrote", err)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, ckptMeta{}, err
	}
	defer func() {
		if err != nil {
			fh.Close()
		}
	}()
	fi, err := fh.Stat()
	if err != nil {
		return nil, nil, ckptMeta{}, err
	}
	size := fi.Size()
	head := make([]byte, min(size, 8))
	if _, err := io.ReadFull(fh, head); err != nil {
		return nil, nil, ckptMeta{}, err
	}
	if len(head) == 8 {
		if hl := binary.LittleEndian.Uint64(head); hl <= maxHeader && hl <= uint64(size-8) {
			head = append(head, make([]byte, hl)...)
			if _, err := io.ReadFull(fh, head[8:]); err != nil {
				return nil, nil, ckptMeta{}, err
			}
		}
	}
	f, start, err := parseSafetensorsHeader(head, size)
	if err != nil {
		return nil, nil, ckptMeta{}, err
	}
	meta, err := checkpointMeta(f)
	if err != nil {
		return nil, nil, ckptMeta{}, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil { // the data section, after the header
		return nil, nil, ckptMeta{}, err
	}
	if err := checkDataHash(f, h.Sum(nil)); err != nil {
		return nil, nil, ckptMeta{}, err
	}
	f.src, f.start = fh, start
	return f, fh, meta, nil
}

// checkpointMeta is the training state a checkpoint's header records.
func checkpointMeta(f *stFile) (ckptMeta, error) {
	var meta ckptMeta
	if _, ok := f.Meta["symddp"]; !ok {
		return ckptMeta{}, ErrNotCheckpoint
	}
	if err := json.Unmarshal([]byte(f.Meta["symddp"]), &meta); err != nil || meta.Format != ckptFormat {
		return ckptMeta{}, fmt.Errorf("%w: no %s metadata", ErrCorrupt, ckptFormat)
	}
	return meta, nil
}

// checkDataHash compares the SHA-256 of a checkpoint's data with its
// header's.
func checkDataHash(f *stFile, sum []byte) error {
	if hex.EncodeToString(sum) != f.Meta["sha256"] {
		return fmt.Errorf("%w: SHA-256 of the data does not match the header (damaged on disk?)", ErrCorrupt)
	}
	return nil
}

// sizeHint says how to build the model that a checkpoint's description
// records key = was for: the flag of train that sizes it, or for
// tied_embeddings (a preset's choice, no flag) what the model must be.
func sizeHint(key string, was int) string {
	if key == "tied_embeddings" {
		if was != 0 {
			return "build a model whose output head is its token embedding (tied)"
		}
		return "build a model whose output head is a matrix of its own (untied)"
	}
	return fmt.Sprintf("pass --%s %d", strings.ReplaceAll(key, "_", "-"), was)
}
