package ddp_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/optim"
)

// TestResumeIsExact: 2N steps in one run equal N steps, a checkpoint, a
// resume and N more steps, bit for bit, at 4 PEs, with SGD momentum and Adam.
func TestResumeIsExact(t *testing.T) {
	for _, opt := range []string{"sgd", "adam"} {
		t.Run(opt, func(t *testing.T) {
			lr := float32(0.05)
			if opt == "adam" {
				lr = 1e-3
			}
			dir := filepath.Join(os.TempDir(), "symddp-resume-"+opt+"-"+strings.ReplaceAll(t.Name(), "/", "_"))
			if !launchtest.InPE() {
				os.RemoveAll(dir)
				t.Cleanup(func() { os.RemoveAll(dir) })
			}
			job := func(steps int, ck ddp.CheckpointOptions) func(t *testing.T, c comm.Comm) record {
				return func(t *testing.T, c comm.Comm) record {
					o := baseOpts()
					o.LR, o.MaxSteps, o.Checkpoint = lr, steps, ck
					return trainIn(t, c, opt, o, context.Background())
				}
			}
			whole := runJob(t, "whole", 4, job(30, ddp.CheckpointOptions{}))
			first := runJob(t, "first", 4, job(15, ddp.CheckpointOptions{Dir: dir}))
			second := runJob(t, "second", 4, job(30, ddp.CheckpointOptions{Dir: dir, Resume: "latest"}))
			if launchtest.InPE() {
				return
			}
			for _, r := range []record{whole, first, second} {
				if r.Err != "" || !r.Identity {
					t.Fatalf("err %q, replicas identical %v", r.Err, r.Identity)
				}
			}
			if first.Steps != 15 || second.Steps != 30 || len(second.Losses) != 15 {
				t.Fatalf("steps %d then %d (%d logged); want 15 then 30 (15 logged)", first.Steps, second.Steps, len(second.Losses))
			}
			if whole.Hash != second.Hash {
				t.Fatalf("parameters after 30 steps: %016x in one run, %016x with a resume at 15", whole.Hash, second.Hash)
			}
		})
	}
}

// TestKillDuringSave: a PE killed with SIGKILL half way through writing a
// checkpoint leaves the previous one loadable, and the run resumes from it
// to the same bits as a run never interrupted.
func TestKillDuringSave(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "symddp-killsave")
	if !launchtest.InPE() {
		os.RemoveAll(dir)
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	body := func(kill bool, resume string) func(t *testing.T, c comm.Comm) record {
		return func(t *testing.T, c comm.Comm) record {
			o := baseOpts()
			o.MaxSteps = 30
			o.Checkpoint = ddp.CheckpointOptions{Dir: dir, Every: 10, Resume: resume}
			if kill && c.MyPE() == 0 {
				saves := 0
				o.Hooks.OnCheckpoint = func(string, int) { saves++ }
				ddp.SetCheckpointBytesHook(func(n int64) {
					if saves == 1 && n > 20_000 { // the second save (55 KB), mid-file
						syscall.Kill(os.Getpid(), syscall.SIGKILL)
					}
				})
			}
			return trainIn(t, c, "sgd", o, context.Background())
		}
	}
	var killErr error
	t.Run("killed", func(t *testing.T) {
		_, killErr = launchtest.Launch(t, launchtest.Job{NPEs: 2}, func(t *testing.T, c comm.Comm) { body(true, "")(t, c) })
	})
	resumed := runJob(t, "resumed", 2, body(false, "latest"))
	whole := runJob(t, "whole", 2, func(t *testing.T, c comm.Comm) record {
		o := baseOpts()
		o.MaxSteps = 30
		return trainIn(t, c, "sgd", o, context.Background())
	})
	if launchtest.InPE() {
		return
	}
	if killErr == nil || !strings.Contains(killErr.Error(), "PE 0") {
		t.Fatalf("the killed job ended with %v, want a failure of PE 0", killErr)
	}
	if resumed.Err != "" || resumed.Steps != 30 || len(resumed.Losses) != 20 {
		t.Fatalf("resumed: err %q, %d steps, %d logged; want 30 steps with 20 after the resume at 10", resumed.Err, resumed.Steps, len(resumed.Losses))
	}
	if resumed.Hash != whole.Hash {
		t.Fatalf("resumed run ends at %016x, uninterrupted run at %016x", resumed.Hash, whole.Hash)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".ckpt-*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left after a later save: %v", left)
	}
}

// fitLocal trains an mlp on one PE in this process.
func fitLocal(t *testing.T, hidden int, opts ddp.Options) (ddp.Result, error) {
	t.Helper()
	c, err := comm.Open("shm", comm.Config{NPEs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	train, test := smallData(t)
	tr := newLocalTrainer(t, c, hidden, opts)
	defer tr.Close()
	return tr.Fit(context.Background(), train, test)
}

// TestCheckpointErrors: truncated, corrupt and mismatched files each give a
// clear error, which wraps ErrCorrupt or ErrMismatch on every PE (PE 0
// reads the file and tells the others); "latest" falls back past a damaged
// newest file with a warning.
func TestCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	o := baseOpts()
	o.MaxSteps = 6
	o.Checkpoint = ddp.CheckpointOptions{Dir: dir, Every: 2, Keep: 5}
	if _, err := fitLocal(t, 64, o); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.safetensors"))
	if len(names) != 3 { // steps 2, 4 and 6 (the end)
		t.Fatalf("checkpoints %v, want 3", names)
	}
	newest := filepath.Join(dir, "ckpt-000000006.safetensors")
	good, _ := os.ReadFile(newest)

	// A fresh start there would overwrite and prune them: refused, the
	// files kept.
	if _, err := fitLocal(t, 64, o); !errors.Is(err, ddp.ErrCheckpointDirInUse) ||
		!strings.Contains(err.Error(), "(3, the newest ckpt-000000006.safetensors), which a run started afresh would overwrite and prune: resume from its newest") {
		t.Fatalf("fresh start in a directory of checkpoints: %v", err)
	}
	if again, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.safetensors")); !slices.Equal(again, names) {
		t.Fatalf("checkpoints after the refusal %v, want %v", again, names)
	}

	resume := func(path string, hidden int, warn *[]string) error {
		o := baseOpts()
		o.MaxSteps = 8
		o.Checkpoint = ddp.CheckpointOptions{Dir: dir, Resume: path}
		o.Hooks.OnWarning = func(w string) { *warn = append(*warn, w) }
		_, err := fitLocal(t, hidden, o)
		return err
	}
	var warns []string

	// Truncated: an explicit path fails; latest falls back to step 4.
	os.WriteFile(newest, good[:len(good)/2], 0o644)
	if err := resume(newest, 64, &warns); !errors.Is(err, ddp.ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated file: %v", err)
	}
	warns = nil
	if err := resume("latest", 64, &warns); err != nil {
		t.Fatalf("latest with a truncated newest file: %v", err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "falling back to the previous checkpoint") || !strings.Contains(warns[0], "ckpt-000000004") {
		t.Fatalf("warnings %q", warns)
	}

	// Corrupt: one flipped bit in the data fails the checksum.
	bad := append([]byte(nil), good...)
	bad[len(bad)-3] ^= 0x10
	os.WriteFile(newest, bad, 0o644)
	if err := resume(newest, 64, &warns); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("flipped bit: %v", err)
	}

	// Mismatched: another model's shapes are named with both shapes.
	os.WriteFile(newest, good, 0o644)
	err := resume(newest, 32, &warns)
	if !errors.Is(err, ddp.ErrMismatch) || !strings.Contains(err.Error(), "fc1.weight has shape [64 32] in the checkpoint and [32 32] in the model") {
		t.Fatalf("mismatched model: %v", err)
	}
	// A mismatch is never skipped by latest.
	warns = nil
	if err := resume("latest", 32, &warns); !errors.Is(err, ddp.ErrMismatch) || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("latest with a mismatched model: %v", err)
	}
}

// TestSafetensorsHeader reads a checkpoint's header with nothing but
// encoding/json and checks names, dtypes, shapes and offsets.
func TestSafetensorsHeader(t *testing.T) {
	dir := t.TempDir()
	o := baseOpts()
	o.MaxSteps = 2
	o.Checkpoint = ddp.CheckpointOptions{Dir: dir}
	if _, err := fitLocal(t, 64, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ckpt-000000002.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n%8 != 0 || 8+n > uint64(len(b)) {
		t.Fatalf("header length %d in a %d-byte file", n, len(b))
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	params := map[string][]int{
		"fc1.weight": {64, 32}, "fc1.bias": {64}, "fc2.weight": {64, 64}, "fc2.bias": {64},
		"fc3.weight": {10, 64}, "fc3.bias": {10},
	}
	want := map[string][]int{}
	for k, v := range params {
		want[k], want["optimizer.momentum."+k] = v, v
	}
	data := uint64(len(b)) - 8 - n
	var covered uint64
	for name, shape := range want {
		var e struct {
			DType   string   `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(h[name], &e); err != nil {
			t.Fatalf("tensor %s: %v (header %s)", name, err, b[8:8+n])
		}
		size := uint64(4)
		for _, d := range shape {
			size *= uint64(d)
		}
		if e.DType != "F32" || !slices.Equal(e.Shape, shape) || len(e.Offsets) != 2 || e.Offsets[1]-e.Offsets[0] != size || e.Offsets[1] > data {
			t.Fatalf("tensor %s: %+v, want F32 %v of %d bytes within %d", name, e, shape, size, data)
		}
		covered += size
	}
	if covered != data || len(h) != len(want)+1 {
		t.Fatalf("%d tensors covering %d of %d data bytes; want %d tensors and __metadata__", len(h), covered, data, len(want))
	}
	var meta map[string]string
	if err := json.Unmarshal(h["__metadata__"], &meta); err != nil || meta["sha256"] == "" || !strings.Contains(meta["symddp"], `"step":2`) {
		t.Fatalf("metadata %v (%v)", meta, err)
	}
}

// TestResumeOnOtherPECount: a checkpoint of 2 PEs resumes on 4 PEs; the
// global batches continue, so the losses follow the 2-PE run closely, and
// a warning says the sums may round differently.
func TestResumeOnOtherPECount(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "symddp-resume-pes")
	if !launchtest.InPE() {
		os.RemoveAll(dir)
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	job := func(steps int, ck ddp.CheckpointOptions) func(t *testing.T, c comm.Comm) record {
		return func(t *testing.T, c comm.Comm) record {
			o := baseOpts()
			o.MaxSteps, o.Checkpoint = steps, ck
			return trainIn(t, c, "sgd", o, context.Background())
		}
	}
	whole := runJob(t, "whole2", 2, job(20, ddp.CheckpointOptions{}))
	runJob(t, "first2", 2, job(10, ddp.CheckpointOptions{Dir: dir}))
	more := runJob(t, "then4", 4, job(20, ddp.CheckpointOptions{Dir: dir, Resume: "latest"}))
	if launchtest.InPE() {
		return
	}
	if more.Err != "" || more.Steps != 20 || !more.Identity {
		t.Fatalf("resume on 4 PEs: err %q, %d steps", more.Err, more.Steps)
	}
	if w := strings.Join(more.Warnings, "\n"); !strings.Contains(w, "was written by 2 PEs and resumes on 4") || !strings.Contains(w, "sums may round differently") {
		t.Errorf("resume on 4 PEs: warnings %q, want one saying the checkpoint of 2 PEs resumes on 4", more.Warnings)
	}
	for i, l := range more.Losses {
		if d := l - whole.Losses[10+i]; d > 1e-4 || d < -1e-4 {
			t.Fatalf("step %d: loss %.6f after resuming on 4 PEs, %.6f on 2", 11+i, l, whole.Losses[10+i])
		}
	}
}

// TestResumeStateUnreadable: PE 0 reads the optimizer state slot by slot
// as it installs it, after the parameters; a slot it cannot read (the file
// cut short in place after it was verified: Adam's second moment) ends the
// resume on both PEs with an error naming the file, as one shared by PE 0,
// and no PE waits for a broadcast that never comes.
func TestResumeStateUnreadable(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "symddp-resume-unreadable")
	if !launchtest.InPE() {
		os.RemoveAll(dir)
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	runJob(t, "first", 2, func(t *testing.T, c comm.Comm) record {
		o := baseOpts()
		o.LR, o.MaxSteps, o.Checkpoint = 1e-3, 6, ddp.CheckpointOptions{Dir: dir}
		return trainIn(t, c, "adam", o, context.Background())
	})
	cut := runJob(t, "cut", 2, func(t *testing.T, c comm.Comm) record {
		o := baseOpts()
		o.LR, o.MaxSteps, o.Checkpoint = 1e-3, 8, ddp.CheckpointOptions{Dir: dir, Resume: "latest"}
		if c.MyPE() == 0 {
			ddp.SetStateReadHook(func(path string, k int) {
				if k == 1 {
					fi, _ := os.Stat(path)
					os.Truncate(path, fi.Size()-100)
				}
			})
		}
		r := trainIn(t, c, "adam", o, context.Background())
		if !strings.Contains(r.Err, "resume: load checkpoint "+filepath.Join(dir, "ckpt-000000006.safetensors")) ||
			!strings.Contains(r.Err, "EOF") || r.Steps != 0 {
			t.Errorf("PE %d: err %q after %d steps, want the resume refused for the checkpoint's unreadable state", c.MyPE(), r.Err, r.Steps)
		}
		return r
	})
	if launchtest.InPE() {
		return
	}
	if cut.Err == "" {
		t.Fatal("resume from a checkpoint whose state could not be read went on")
	}
}

func FuzzParseSafetensors(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}              "))
	f.Add([]byte("\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":{}}"))
	f.Add([]byte("\x30\x00\x00\x00\x00\x00\x00\x00{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}\x00\x00\x80\x3f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ddp.ParseSafetensors(b) // must not panic or hang
	})
}

// TestMaxStepsWithoutEpochs: Epochs 0 with MaxSteps trains MaxSteps steps,
// over as many epochs as they take (it was one epoch: 16 steps here, while
// a schedule made for the whole run went on), to the bits of a run whose
// Epochs are more than enough.
func TestMaxStepsWithoutEpochs(t *testing.T) {
	run := func(epochs int) ddp.Result {
		o := baseOpts() // 16 steps an epoch
		o.Epochs, o.MaxSteps = epochs, 50
		res, err := fitLocal(t, 64, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	none, ten := run(0), run(10)
	if none.Steps != 50 || none.Epochs != 3 {
		t.Fatalf("Epochs 0, MaxSteps 50: %d steps, %d epochs; want 50 and 3", none.Steps, none.Epochs)
	}
	if none.Replicas.Hashes[0] != ten.Replicas.Hashes[0] || none.Test.Loss != ten.Test.Loss {
		t.Fatalf("Epochs 0: hash %016x, test loss %g; Epochs 10: %016x, %g", none.Replicas.Hashes[0], none.Test.Loss, ten.Replicas.Hashes[0], ten.Test.Loss)
	}
}

// TestScheduleSettledAtZeroWarns: a cosine made for fewer steps than the
// run trains leaves the last steps at a learning rate of 0; Fit says which
// (to OnWarning, or on standard error without one), and a schedule made for
// Options.Steps says nothing.
func TestScheduleSettledAtZeroWarns(t *testing.T) {
	train, _ := smallData(t)
	o := baseOpts()
	o.Epochs, o.MaxSteps = 0, 6
	if got := o.Steps(train.Len()); got != 6 {
		t.Fatalf("Steps: %d, want MaxSteps 6", got)
	}
	for _, c := range []struct {
		o    ddp.Options
		want int
	}{
		{ddp.Options{GlobalBatch: 64, Epochs: 3}, 48}, // 1024 samples: 16 steps an epoch
		{ddp.Options{GlobalBatch: 100, Epochs: 2}, 22},
		{ddp.Options{GlobalBatch: 64, Epochs: 3, MaxSteps: 20}, 20},
		{ddp.Options{GlobalBatch: 64, Epochs: 1, MaxSteps: 20}, 16},
		{ddp.Options{GlobalBatch: 64}, 16},
	} {
		if got := c.o.Steps(train.Len()); got != c.want {
			t.Errorf("%+v: Steps %d, want %d", c.o, got, c.want)
		}
	}
	fit := func(total int, hook bool) (warns []string, stderr string) {
		o := o
		o.Schedule, _ = optim.NewSchedule("cosine", optim.ScheduleConfig{LR: 0.05, Total: total})
		if hook {
			o.Hooks.OnWarning = func(w string) { warns = append(warns, w) }
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		saved := os.Stderr
		os.Stderr = w
		_, ferr := fitLocal(t, 64, o)
		os.Stderr = saved
		w.Close()
		b, _ := io.ReadAll(r)
		if ferr != nil {
			t.Fatal(ferr)
		}
		return warns, string(b)
	}
	want := "the learning-rate schedule reaches 0 at step 4 and this run trains 6 steps: steps 4 to 6 would change nothing"
	if warns, _ := fit(3, true); len(warns) != 1 || !strings.Contains(warns[0], want) {
		t.Errorf("cosine of 3 steps, run of 6: warnings %q, want one saying %q", warns, want)
	}
	if _, stderr := fit(3, false); !strings.Contains(stderr, "ddp: warning: "+want) {
		t.Errorf("without OnWarning: standard error %q, want the warning", stderr)
	}
	if warns, _ := fit(o.Steps(train.Len()), true); len(warns) != 0 {
		t.Errorf("cosine made for the run's steps: warnings %q", warns)
	}
}
