package traincmd

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// job is one run of the train binary in a private heap directory.
type job struct {
	cmd     *exec.Cmd
	heapDir string
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	took    time.Duration
	code    int
}

// base is a small, long run: faults must end it, not its length.
var base = []string{"--dataset", "synthetic", "--hidden", "32", "--batch-size", "64",
	"--max-steps", "100000", "--epochs", "1000", "--log-every", "1000000", "--eval-every", "0", "--no-progress"}

func newJob(t *testing.T, args ...string) *job {
	t.Helper()
	return newJobOf(t, append(append([]string{}, base...), args...)...)
}

// newJobOf is a job of train with args alone.
func newJobOf(t *testing.T, args ...string) *job {
	t.Helper()
	j := &job{heapDir: t.TempDir()}
	j.cmd = exec.Command(trainBinary(t), args...)
	j.cmd.Env = append(os.Environ(), "SYMDDP_HEAP_DIR="+j.heapDir)
	j.cmd.Stdout, j.cmd.Stderr = &j.stdout, &j.stderr
	return j
}

// interrupt starts j, sends it SIGINT once stdout shows marker and waits
// for it: it must exit 130 with stdout holding out and PE 0 saying once
// what the signal does.
func (j *job) interrupt(t *testing.T, marker, out, said string) {
	t.Helper()
	j.startAndWait(t, marker)
	start := time.Now()
	j.cmd.Process.Signal(syscall.SIGINT)
	j.code = exitCode(t, j.cmd.Wait())
	if j.code != 130 || !strings.Contains(j.stdout.String(), out) {
		t.Fatalf("exit %d (want 130 and %q), stdout:\n%s\nstderr:\n%s", j.code, out, j.stdout.String(), j.stderr.String())
	}
	if msg := "[pe 0] train: SIGINT: " + said + "; SIGINT again stops at once"; strings.Count(j.stderr.String(), msg) != 1 {
		t.Errorf("stderr does not say once what the SIGINT does (%q):\n%s", msg, j.stderr.String())
	}
	t.Logf("stopped %v after SIGINT", time.Since(start))
}

// run runs the job to its end.
func (j *job) run(t *testing.T) *job {
	t.Helper()
	start := time.Now()
	err := j.cmd.Run()
	j.took = time.Since(start)
	j.code = exitCode(t, err)
	return j
}

func exitCode(t *testing.T, err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("train did not run: %v", err)
	return -1
}

// clean asserts that the job left no heap file and no run directory.
func (j *job) clean(t *testing.T) {
	t.Helper()
	if left, _ := filepath.Glob(filepath.Join(j.heapDir, "*")); len(left) > 0 {
		t.Errorf("heap files left behind: %v", left)
	}
	runDirs, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("symddp-run-%d-*", j.cmd.Process.Pid)))
	if len(runDirs) > 0 {
		t.Errorf("run directories left behind: %v", runDirs)
	}
}

// TestPECrash: a PE that exits, panics or is killed in the middle of the
// run stops the whole job, with a non-zero status and a message naming the
// PE and the cause, and nothing left in the heap directory. The launcher
// stops the other PEs when it sees the crash: the job is given a collective
// deadline of 10 minutes, and no PE may have reached it (a PE that did would
// say which peers had not arrived); a launcher that waited for the deadline
// would make the test run into go test's own timeout instead.
func TestPECrash(t *testing.T) {
	for _, tc := range []struct {
		mode string
		code int
		want string
	}{
		{"exit", 1, "PE 2 failed: exit status 1"},
		{"panic", 1, "panic: fault injected: PE 2 panics before step 5"},
		{"kill", 137, "PE 2 failed: killed by signal 9"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			j := newJob(t, "--pes", "4", "--timeout", "10m", "--fault-inject", "pe=2,step=5,mode="+tc.mode).run(t)
			if j.code != tc.code || !strings.Contains(j.stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", j.code, j.stderr.String(), tc.code, tc.want)
			}
			if strings.Contains(j.stderr.String(), "not arrived") {
				t.Errorf("a PE waited for the collective deadline instead of being stopped by the launcher:\n%s", j.stderr.String())
			}
			// the launcher's SIGTERM to the others is not the user's: PE 0
			// said "SIGTERM: stopping after the step in progress" here
			if strings.Contains(j.stderr.String(), "stopping after the step in progress") {
				t.Errorf("a PE stopped by the launcher said it was asked to stop:\n%s", j.stderr.String())
			}
			t.Logf("the job stopped %v after it started", j.took)
			j.clean(t)
		})
	}
}

// TestStalledPE: a PE that stops responding makes the others fail at the
// deadline with a message that names it.
func TestStalledPE(t *testing.T) {
	j := newJob(t, "--pes", "3", "--batch-size", "63", "--timeout", "2s", "--fault-inject", "pe=1,step=3,mode=hang").run(t)
	if j.code == 0 || !strings.Contains(j.stderr.String(), "PEs not arrived: [1]") {
		t.Fatalf("exit %d, stderr:\n%s\nwant a deadline error naming PE 1", j.code, j.stderr.String())
	}
	j.clean(t)
}

// With SYMDDP_STOP_STACKS=1 the stalled PE, stopped by the launcher after
// the others gave up on it, writes its goroutines' stacks first: the stall
// shows (the fault's sleep).
func TestStalledPEStacks(t *testing.T) {
	j := newJob(t, "--pes", "3", "--batch-size", "63", "--timeout", "2s", "--fault-inject", "pe=1,step=3,mode=hang")
	j.cmd.Env = append(j.cmd.Env, "SYMDDP_STOP_STACKS=1")
	j.run(t)
	errs := j.stderr.String()
	if j.code == 0 || !strings.Contains(errs, "the goroutines' stacks (SYMDDP_STOP_STACKS)") ||
		!strings.Contains(errs, "time.Sleep") || !strings.Contains(errs, "traincmd.") {
		t.Fatalf("exit %d, stderr:\n%s\nwant the stalled PE's stacks", j.code, errs)
	}
	j.clean(t)
}

// startAndWait starts j and waits until its stdout shows a log line.
func (j *job) startAndWait(t *testing.T, marker string) {
	t.Helper()
	pr, pw := io.Pipe()
	j.cmd.Stdout = io.MultiWriter(&j.stdout, pw)
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), marker) {
				seen <- true
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case <-seen:
	case <-time.After(60 * time.Second):
		j.cmd.Process.Kill()
		t.Fatalf("no %q within 60 s; stderr:\n%s", marker, j.stderr.String())
	}
}

// TestInterruptWritesCheckpoint: SIGINT on the launcher stops every PE after
// the same step (the run would otherwise go on for 100000 steps), a final
// checkpoint is written, and the run can resume.
func TestInterruptWritesCheckpoint(t *testing.T) {
	dir := t.TempDir()
	j := newJob(t, "--pes", "2", "--checkpoint-dir", dir, "--log-every", "20")
	j.interrupt(t, "step 20/", "stopped by signal", "stopping after the step in progress, then a checkpoint")
	ckpts, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.safetensors"))
	if len(ckpts) != 1 {
		t.Fatalf("checkpoints after SIGINT: %v", ckpts)
	}
	j.clean(t)

	r := newJob(t, "--pes", "2", "--checkpoint-dir", dir, "--resume", "latest", "--max-steps", "60")
	r.run(t)
	if r.code != 0 || !strings.Contains(r.stderr.String(), "resumed from "+ckpts[0]) {
		t.Fatalf("resume: exit %d, stderr:\n%s", r.code, r.stderr.String())
	}
}

// TestInterruptAfterTraining: a SIGINT once every step is done (here
// during the final evaluation) says what it stops: no step is left, the
// evaluation finishes and the sample is skipped. It said "stopping after the
// step in progress, then a checkpoint", both done already.
func TestInterruptAfterTraining(t *testing.T) {
	data := t.TempDir()
	var text strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&text, "func f%d(x int) int { return x*%d + %d }\n", i, i%97, i%13)
	}
	for i := range 40 { // every 20th file is validation: 2 files, about 0.3 MB
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("f%02d.go", i)), []byte(text.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := newJobOf(t, "--pes", "2", "--model", "gpt-tiny", "--data-dir", data, "--max-steps", "2",
		"--eval-every", "0", "--eval-batches", "0", "--checkpoint-dir", t.TempDir(), "--no-progress")
	// the last step's checkpoint: the final evaluation runs now, and
	// finishes (its validation loss printed)
	j.interrupt(t, "checkpoint ", "val loss ", "the training is done: stopping after the final evaluation, without a sample")
	j.clean(t)
}

// TestSecondInterruptStopsAtOnce: when the PEs cannot stop by themselves (one
// is stuck), a second SIGINT ends the job at once, not at the collective
// deadline (10 minutes here: a PE that reached it would say which peers had
// not arrived): with --pes 2 the launcher kills the PEs; with --pes 1 the PE
// is this process and exits itself. The first SIGINT says what it does.
func TestSecondInterruptStopsAtOnce(t *testing.T) {
	for _, pes := range []string{"2", "1"} {
		t.Run("pes="+pes, func(t *testing.T) {
			j := newJob(t, "--pes", pes, "--log-every", "5", "--timeout", "10m", "--fault-inject", "pe="+map[string]string{"2": "1", "1": "0"}[pes]+",step=8,mode=hang")
			j.startAndWait(t, "step 5/")
			time.Sleep(300 * time.Millisecond) // the PE is stuck at step 8 by now
			j.cmd.Process.Signal(syscall.SIGINT)
			time.Sleep(300 * time.Millisecond)
			start := time.Now()
			j.cmd.Process.Signal(syscall.SIGINT)
			waited := make(chan error, 1)
			go func() { waited <- j.cmd.Wait() }()
			select {
			case err := <-waited:
				j.code = exitCode(t, err)
			case <-time.After(30 * time.Second):
				j.cmd.Process.Kill()
				<-waited
				t.Fatalf("still running 30 s after the second SIGINT; stderr:\n%s", j.stderr.String())
			}
			if j.code != 130 {
				t.Fatalf("exit %d after two SIGINTs, stderr:\n%s", j.code, j.stderr.String())
			}
			if strings.Contains(j.stderr.String(), "not arrived") {
				t.Errorf("a PE waited for the collective deadline:\n%s", j.stderr.String())
			}
			if msg := "train: SIGINT: stopping after the step in progress; SIGINT again stops at once"; strings.Count(j.stderr.String(), msg) != 1 {
				t.Errorf("stderr does not say once what the first SIGINT does (%q):\n%s", msg, j.stderr.String())
			}
			t.Logf("stopped %v after the second SIGINT", time.Since(start))
			j.clean(t)
		})
	}
}

// TestNonFiniteLoss: a NaN in one PE's data stops the job naming the step;
// with --skip-nonfinite the run goes on and its checkpoint holds no NaN
// (loading it verifies that).
func TestNonFiniteLoss(t *testing.T) {
	j := newJob(t, "--pes", "2", "--fault-inject", "pe=1,step=7,mode=nan").run(t)
	if j.code != 1 || !strings.Contains(j.stderr.String(), "step 7") || !strings.Contains(j.stderr.String(), "not finite") {
		t.Fatalf("exit %d, stderr:\n%s", j.code, j.stderr.String())
	}
	dir := t.TempDir()
	s := newJob(t, "--pes", "2", "--max-steps", "20", "--skip-nonfinite", "--checkpoint-dir", dir,
		"--fault-inject", "pe=1,step=7,mode=nan").run(t)
	if s.code != 0 {
		t.Fatalf("with --skip-nonfinite: exit %d, stderr:\n%s", s.code, s.stderr.String())
	}
	r := newJob(t, "--pes", "2", "--max-steps", "21", "--checkpoint-dir", dir, "--resume", "latest").run(t)
	if r.code != 0 {
		t.Fatalf("resuming the checkpoint of a run with skipped steps: exit %d, stderr:\n%s", r.code, r.stderr.String())
	}
}

// TestBadEnvironment: a heap too small for the model and a heap directory
// that cannot be used are one-line errors saying what to do.
func TestBadEnvironment(t *testing.T) {
	j := newJob(t, "--pes", "2", "--heap-size", "64KiB").run(t)
	if msg := "--heap-size 64KiB is too small for this model"; j.code != 2 || strings.Count(j.stderr.String(), msg) != 1 ||
		strings.Contains(j.stderr.String(), "SYMDDP_HEAP_SIZE") {
		t.Fatalf("--heap-size 64KiB: exit %d, stderr:\n%s\nwant exit 2 and %q once, naming the flag only", j.code, j.stderr.String(), msg)
	}
	j.clean(t)

	k := newJob(t, "--pes", "2")
	missing := filepath.Join(k.heapDir, "no", "such", "dir")
	k.cmd.Env = append(os.Environ(), "SYMDDP_HEAP_DIR="+missing)
	k.run(t)
	if k.code != 1 || !strings.Contains(k.stderr.String(), "create the symmetric heap in "+missing) ||
		!strings.Contains(k.stderr.String(), "SYMDDP_HEAP_DIR") {
		t.Fatalf("missing heap directory: exit %d, stderr:\n%s", k.code, k.stderr.String())
	}
}

// TestHeapDirFull: a full tmpfs is an error that says the heap could not be
// reserved because the directory is full, and what to do; not that the
// heap is exhausted, which points at --heap-size (needs root and mount;
// skipped elsewhere).
func TestHeapDirFull(t *testing.T) {
	j := newJob(t, "--pes", "2")
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", j.heapDir).Run(); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	defer exec.Command("umount", j.heapDir).Run()
	j.run(t)
	const want = "could not reserve its copy in %s: no space left on device (the directory is full: free space in it, or set SYMDDP_HEAP_DIR to a directory with room)"
	if out := j.stderr.String(); j.code != 1 || !strings.Contains(out, fmt.Sprintf(want, j.heapDir)) || strings.Contains(out, "heap exhausted") {
		t.Fatalf("full heap directory: exit %d, stderr:\n%s\nwant exit 1 and %q", j.code, out, fmt.Sprintf(want, j.heapDir))
	}
}

// TestGPULibraryMissing: asking for the GPU backend without the GPU library
// is one line that says where it looked and how to build it, before any PE
// starts.
func TestGPULibraryMissing(t *testing.T) {
	t.Setenv("SYMDDP_CUDA_LIB", filepath.Join(t.TempDir(), "libsymddp_cuda.so"))
	var stdout, stderr bytes.Buffer
	code := run([]string{"--backend", "nvshmem", "--pes", "2", "--dataset", "synthetic"}, &stdout, &stderr)
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "libsymddp_cuda.so not found") ||
		!strings.Contains(lines[0], "cuda/build.sh") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestStopNote: what PE 0 says a first signal stops, in each state of a
// run; under mpirun it does not promise the checkpoint that mpirun's
// SIGKILL can forestall (it did when a rank failed and mpirun stopped the
// others, docs/MPI.md).
func TestStopNote(t *testing.T) {
	for _, tc := range []struct {
		o       options
		mpi     bool
		trained bool
		want    string
	}{
		{options{}, false, false, "stopping after the step in progress"},
		{options{ckptDir: "ck"}, false, false, "stopping after the step in progress, then a checkpoint"},
		{options{ckptDir: "ck"}, true, false, "stopping after the step in progress, then a checkpoint, unless mpirun kills the ranks first (it does when a rank failed, or a step outlasts --mca odls_base_sigkill_timeout: docs/MPI.md)"},
		{options{}, true, false, "stopping after the step in progress"},
		{options{ckptDir: "ck"}, true, true, "the training is done: stopping after the final evaluation, without a sample"},
		{options{evalOnly: true}, false, false, "stopping after the evaluation, without a sample"},
	} {
		if got := stopNote(&tc.o, tc.mpi, tc.trained); got != tc.want {
			t.Errorf("ckpt %q, mpi %v, trained %v: %q, want %q", tc.o.ckptDir, tc.mpi, tc.trained, got, tc.want)
		}
	}
}
