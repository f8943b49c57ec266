package ddp

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/optim"
)

// ctlBytes is the size of the symmetric buffer through which PE 0 tells the
// others the outcome of a checkpoint save or load.
const ctlBytes = 4096

// ctlMsg is PE 0's word to the other PEs about a checkpoint.
type ctlMsg struct {
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
	// Is names the sentinel Err wraps on PE 0 ("mismatch": ErrMismatch,
	// "corrupt": ErrCorrupt), for every PE's error to wrap it too.
	Is       string   `json:"is,omitempty"`
	Path     string   `json:"path,omitempty"`
	Step     int      `json:"step,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// sentinelName names the sentinel error err wraps, for ctlMsg.Is.
func sentinelName(err error) string {
	switch {
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	}
	return ""
}

// err is PE 0's error as every PE returns it: its message, wrapping the
// sentinel PE 0's wrapped (errors.Is(err, ErrMismatch) holds on every PE).
func (m ctlMsg) err() error {
	switch m.Is {
	case "mismatch":
		return sentinelError{m.Err, ErrMismatch}
	case "corrupt":
		return sentinelError{m.Err, ErrCorrupt}
	}
	return errors.New(m.Err)
}

// sentinelError is a message that wraps a sentinel error.
type sentinelError struct {
	msg string
	is  error
}

func (e sentinelError) Error() string { return e.msg }
func (e sentinelError) Unwrap() error { return e.is }

// shareFromRoot broadcasts PE 0's msg to every PE (collective).
func (t *Trainer) shareFromRoot(msg ctlMsg) (ctlMsg, error) {
	buf := make([]byte, ctlBytes)
	if t.c.MyPE() == 0 {
		js, _ := json.Marshal(msg)
		for len(js) > ctlBytes-4 && len(msg.Warnings) > 0 {
			msg.Warnings = msg.Warnings[1:]
			js, _ = json.Marshal(msg)
		}
		if len(js) > ctlBytes-4 {
			msg = ctlMsg{OK: msg.OK, Path: msg.Path, Step: msg.Step, Err: "(message too long)"}
			js, _ = json.Marshal(msg)
		}
		binary.LittleEndian.PutUint32(buf, uint32(len(js)))
		copy(buf[4:], js)
		if err := t.c.PutBytes(t.ctl, 0, buf, 0); err != nil {
			return ctlMsg{}, err
		}
	}
	if err := t.c.Broadcast(t.ctl, 0, ctlBytes, 0); err != nil {
		return ctlMsg{}, err
	}
	if err := t.c.GetBytes(buf, t.ctl, 0, t.c.MyPE()); err != nil {
		return ctlMsg{}, err
	}
	n := binary.LittleEndian.Uint32(buf)
	var out ctlMsg
	if n > ctlBytes-4 || json.Unmarshal(buf[4:4+n], &out) != nil {
		return ctlMsg{}, fmt.Errorf("garbled message from PE 0")
	}
	return out, nil
}

// resume restores the checkpoint that Options.Checkpoint.Resume names
// (collective): PE 0 reads and verifies it, then broadcasts the parameters
// and the optimizer state. It returns the path resumed from, or "" for a
// fresh start.
func (t *Trainer) resume(stepsPerEpoch int) (string, error) {
	if t.opts.Checkpoint.Resume == "" {
		return "", t.checkFreshStart()
	}
	var lc *loadedCheckpoint
	msg := ctlMsg{OK: true}
	if t.c.MyPE() == 0 {
		lc, msg = t.findCheckpoint(stepsPerEpoch)
		defer lc.close()
	}
	got, err := t.shareFromRoot(msg)
	if err != nil {
		return "", fmt.Errorf("resume: %w", err)
	}
	for _, w := range got.Warnings {
		t.warn(w)
	}
	if !got.OK {
		return "", sharedFrom(0, got.err()) // PE 0 read it
	}
	if got.Path == "" {
		return "", nil
	}
	if lc != nil {
		t.e.SetTensor(t.pView, lc.params)
		if err := t.e.Sync(); err != nil {
			return "", fmt.Errorf("resume: %w", err)
		}
	}
	if err := t.c.Broadcast(t.params, 0, t.n, 0); err != nil {
		return "", fmt.Errorf("resume: broadcast parameters: %w", err)
	}
	t.paramsWritten()
	readErr, err := t.installState(lc)
	if err != nil {
		return "", err
	}
	// PE 0 read the state as it went: whether it all came is told to all
	read := ctlMsg{OK: readErr == nil}
	if readErr != nil {
		read.Err = readErr.Error()
	}
	all, err := t.shareFromRoot(read)
	if err != nil {
		return "", fmt.Errorf("resume: %w", err)
	}
	if !all.OK {
		if readErr == nil {
			readErr = errors.New(all.Err)
		}
		return "", sharedFrom(0, fmt.Errorf("resume: %w", readErr))
	}
	t.step = got.Step
	return got.Path, nil
}

// checkFreshStart refuses (collective) a first Fit that starts afresh in a
// checkpoint directory holding checkpoints: PE 0 looks (it alone writes
// there) and tells the others.
func (t *Trainer) checkFreshStart() error {
	dir := t.opts.Checkpoint.Dir
	if dir == "" || t.step > 0 {
		return nil
	}
	msg, mine := ctlMsg{OK: true}, error(nil)
	if t.c.MyPE() == 0 {
		if err := CheckFreshCheckpointDir(dir); err != nil {
			mine = fmt.Errorf("checkpoint directory %s: %w: resume from its newest (Checkpoint.Resume \"latest\") or use another directory", dir, err)
			msg = ctlMsg{Err: mine.Error()}
		}
	}
	got, err := t.shareFromRoot(msg)
	if err != nil {
		return fmt.Errorf("check checkpoint directory: %w", err)
	}
	if !got.OK {
		if mine == nil {
			mine = errors.New(got.Err)
		}
		return sharedFrom(0, mine)
	}
	return nil
}

// installState broadcasts PE 0's optimizer state slot by slot, staged in
// the gradient arena (which holds nothing between steps), reading each
// slot from the checkpoint as it goes. A slot PE 0 cannot read is
// broadcast as zeros and the first such error returned as readErr, so that
// every PE still takes part in every broadcast; err is a failure of the
// engine or the broadcasts themselves.
func (t *Trainer) installState(lc *loadedCheckpoint) (readErr, err error) {
	slots := t.o.Slots()
	if slots == 0 {
		return nil, nil
	}
	// a device engine's state tensors, and the part of the (whole) slot
	// staged in the gradient arena that they hold: all of it, or this PE's
	// shard with the sharded device update
	var dev []compute.Tensor
	src := t.gView
	if t.pArena.Host == nil {
		ds, ok := t.e.(DeviceOptimizerState)
		if !ok {
			return nil, fmt.Errorf("resume: engine %s cannot take optimizer state", t.e.Name())
		}
		n := t.n
		if t.dshard != nil {
			n, src = t.dshard.stateLen(), t.dshard.g
		}
		var err error
		if dev, err = ds.AllocOptimizerState(t.o, n); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
	}
	for k := 0; k < slots; k++ {
		if lc != nil {
			if readErr == nil {
				readErr = lc.readState(t, k)
			}
			if readErr != nil {
				clear(lc.params)
			}
			t.e.SetTensor(t.gView, lc.params)
			if err := t.e.Sync(); err != nil {
				return readErr, fmt.Errorf("resume: %w", err)
			}
		}
		if err := t.c.Broadcast(t.grads, 0, t.n, 0); err != nil {
			return readErr, fmt.Errorf("resume: broadcast optimizer state: %w", err)
		}
		if dev != nil {
			t.e.Copy(dev[k], src)
		} else {
			t.e.ReadTensor(t.stateSlots[k], t.gView)
		}
	}
	t.e.Zero(t.gView)
	return readErr, t.e.Sync()
}

// findCheckpoint picks and loads the checkpoint to resume from, on PE 0.
// With "latest", an unusable newest checkpoint gives a warning and the one
// before it is tried; a checkpoint of another model or configuration is an
// error, never skipped.
func (t *Trainer) findCheckpoint(stepsPerEpoch int) (*loadedCheckpoint, ctlMsg) {
	fail := func(err error) (*loadedCheckpoint, ctlMsg) { return nil, ctlMsg{Err: err.Error()} }
	want := t.opts.Checkpoint.Resume
	var paths []string
	var warns []string
	if want == "latest" {
		dir := t.opts.Checkpoint.Dir
		ps, err := listCheckpoints(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fail(fmt.Errorf("resume: %w", err))
		}
		if len(ps) == 0 {
			return nil, ctlMsg{OK: true, Warnings: []string{fmt.Sprintf("no checkpoint in %s: starting from scratch", dir)}}
		}
		paths = ps
	} else {
		paths = []string{want}
	}
	for i, p := range paths {
		lc, err := t.loadCheckpoint(p)
		if err == nil {
			if err = t.checkPosition(lc.meta, stepsPerEpoch); err != nil {
				lc.close()
			}
		}
		if err == nil {
			if lc.meta.NPEs != t.c.NPEs() {
				warns = append(warns, fmt.Sprintf("%s was written by %d PEs and resumes on %d: the global batches continue unchanged (docs/DESIGN.md), sums may round differently",
					p, lc.meta.NPEs, t.c.NPEs()))
			}
			if lc.meta.NextLR != nil {
				if next, here := *lc.meta.NextLR, t.opts.lr(lc.meta.Step+1); next != here {
					warns = append(warns, fmt.Sprintf("%s was written by a run whose schedule gives step %d a learning rate of %.6g; this run's gives it %.6g (another --max-steps, --epochs, --lr or --warmup-steps): the resumed steps follow this run's schedule",
						p, lc.meta.Step+1, next, here))
				}
			}
			if d := recipeChanges(lc.meta, t.o.Hyper().Config, t.opts.Recipe); len(d) > 0 {
				warns = append(warns, fmt.Sprintf("%s was written with another recipe: %s; the resumed steps follow this run's (give the writing run's values to continue it unchanged)",
					p, strings.Join(d, ", ")))
			}
			return lc, ctlMsg{OK: true, Path: p, Step: lc.meta.Step, Warnings: warns}
		}
		if errors.Is(err, ErrMismatch) || want != "latest" || i == len(paths)-1 {
			if i > 0 {
				err = fmt.Errorf("%w (and no newer checkpoint was usable)", err)
			}
			return nil, ctlMsg{Err: err.Error(), Is: sentinelName(err), Warnings: warns}
		}
		warns = append(warns, fmt.Sprintf("%v; falling back to the previous checkpoint %s", err, paths[i+1]))
	}
	return fail(errors.New("resume: no checkpoint"))
}

// checkPosition checks that the checkpoint's step falls where this run's
// epochs put it (the dataset size or batch must not have changed).
func (t *Trainer) checkPosition(m ckptMeta, stepsPerEpoch int) error {
	if m.Step/stepsPerEpoch != m.Epoch || m.Step%stepsPerEpoch != m.StepInEpoch {
		return fmt.Errorf("%w: step %d was epoch %d batch %d when written, but this run has %d steps per epoch (did the dataset change?)",
			ErrMismatch, m.Step, m.Epoch, m.StepInEpoch, stepsPerEpoch)
	}
	return nil
}

// recipeChanges lists what a resumed run does otherwise than the run that
// wrote the checkpoint, each as "name was → now": the optimizer's
// hyperparameters (recorded in every checkpoint), then the keys of
// Options.Recipe that both runs record with other values (the caller's
// names and values, compared as JSON has them). The schedule's learning
// rate has a warning of its own (NextLR); max_steps or total_steps here
// say why.
func recipeChanges(m ckptMeta, now optim.Config, recipe map[string]any) []string {
	was := m.Optimizer.Config
	var d []string
	seen := map[string]bool{}
	add := func(name string, a, b any) {
		seen[name] = true
		if a != b {
			d = append(d, fmt.Sprintf("%s %v → %v", name, a, b))
		}
	}
	add("momentum", was.Momentum, now.Momentum)
	add("nesterov", was.Nesterov, now.Nesterov)
	add("weight_decay", was.WeightDecay, now.WeightDecay)
	add("beta1", was.Beta1, now.Beta1)
	add("beta2", was.Beta2, now.Beta2)
	add("eps", was.Eps, now.Eps)
	if m.Recipe == nil || recipe == nil {
		return d
	}
	var cur map[string]any // recipe as a checkpoint's JSON gives it back
	if js, err := json.Marshal(recipe); err != nil || json.Unmarshal(js, &cur) != nil {
		return d
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		a, ok := m.Recipe[k]
		if !ok || seen[k] {
			continue
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(cur[k])
		if string(ja) != string(jb) {
			d = append(d, fmt.Sprintf("%s %v → %v", k, a, cur[k]))
		}
	}
	return d
}
