package traincmd

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/ddp"
)

// short is a run of 20 steps: enough to write, fail and report.
var short = []string{"--max-steps", "20", "--log-every", "10"}

// TestMetricsUnwritable: a metrics file that cannot be opened is a start-up
// error (exit 2, one line, nothing created); one whose writes fail (/dev/full)
// trains to the end, prints the results and the error once, and exits 1.
func TestMetricsUnwritable(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent", "m.jsonl")
	j := newJob(t, append([]string{"--pes", "2", "--metrics", missing}, short...)...).run(t)
	lines := strings.Split(strings.TrimSpace(j.stderr.String()), "\n")
	if j.code != 2 || len(lines) != 1 || lines[0] != "train: --metrics "+missing+": no such file or directory" {
		t.Fatalf("missing directory: exit %d, stderr:\n%s\nwant exit 2 and one line", j.code, j.stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	f := newJob(t, append([]string{"--pes", "2", "--metrics", "/dev/full"}, short...)...).run(t)
	msg := "--metrics /dev/full: no space left on device"
	if f.code != 1 || strings.Count(f.stderr.String(), msg) != 1 {
		t.Fatalf("/dev/full: exit %d, stderr:\n%s\nwant exit 1 and %q once", f.code, f.stderr.String(), msg)
	}
	for _, want := range []string{"done: 20 steps", "test accuracy", "replicas identical"} {
		if !strings.Contains(f.stdout.String(), want) {
			t.Errorf("/dev/full: stdout lacks %q:\n%s", want, f.stdout.String())
		}
	}
	f.clean(t)
}

// TestCheckpointDirUnwritable: a checkpoint directory that cannot be
// created or written is found before any PE starts (exit 2, one line); a
// save that fails at the end of the run (a full file system) still prints
// the run's results, then the error, and exits 1.
func TestCheckpointDirUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	bad := filepath.Join(file, "ckpt")
	j := newJob(t, append([]string{"--pes", "2", "--checkpoint-dir", bad}, short...)...).run(t)
	lines := strings.Split(strings.TrimSpace(j.stderr.String()), "\n")
	if j.code != 2 || len(lines) != 1 || lines[0] != "train: --checkpoint-dir "+bad+": cannot create it: not a directory" {
		t.Fatalf("checkpoint dir under a file: exit %d, stderr:\n%s\nwant exit 2 and one line", j.code, j.stderr.String())
	}
	j = newJob(t, append([]string{"--pes", "2", "--checkpoint-dir", file}, short...)...).run(t)
	if lines := strings.Split(strings.TrimSpace(j.stderr.String()), "\n"); j.code != 2 || lines[0] != "train: --checkpoint-dir "+file+": it exists and is not a directory" {
		t.Fatalf("checkpoint dir that is a file: exit %d, stderr:\n%s", j.code, j.stderr.String())
	}
	j.clean(t)

	if os.Geteuid() != 0 { // root writes into a mode-0500 directory anyway
		ro := t.TempDir()
		os.Chmod(ro, 0o500)
		defer os.Chmod(ro, 0o700)
		k := newJob(t, append([]string{"--pes", "2", "--checkpoint-dir", ro}, short...)...).run(t)
		if k.code != 2 || !strings.Contains(k.stderr.String(), "--checkpoint-dir "+ro+": cannot write in it: permission denied") {
			t.Errorf("read-only checkpoint dir: exit %d, stderr:\n%s", k.code, k.stderr.String())
		}
	}

	full := newJob(t, append([]string{"--pes", "2"}, short...)...)
	dir := filepath.Join(full.heapDir, "ckpt")
	os.Mkdir(dir, 0o755)
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).Run(); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	defer exec.Command("umount", dir).Run()
	full.cmd.Args = append(full.cmd.Args, "--checkpoint-dir", dir, "--checkpoint-every", "10")
	full.run(t)
	// the periodic save at step 10 fails as a warning and training goes on;
	// the final one at step 20 is the run's error
	msg := "checkpoint not saved at step 20"
	if full.code != 1 || strings.Count(full.stderr.String(), msg) != 1 || !strings.Contains(full.stderr.String(), "no space left on device") {
		t.Fatalf("full checkpoint dir: exit %d, stderr:\n%s\nwant exit 1 and %q once", full.code, full.stderr.String(), msg)
	}
	if warn := regexp.MustCompile(`checkpoint not saved at step 10: .*; training goes on`); !warn.MatchString(full.stderr.String()) {
		t.Errorf("full checkpoint dir: stderr lacks the warning of step 10's save (%s):\n%s", warn, full.stderr.String())
	}
	for _, want := range []string{"done: 20 steps", "test accuracy", "replicas identical"} {
		if !strings.Contains(full.stdout.String(), want) {
			t.Errorf("full checkpoint dir: stdout lacks %q:\n%s", want, full.stdout.String())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("left in the checkpoint dir: %v", left)
	}
}

// TestPEsUnderMPI: under mpirun, --pes is checked against the job size
// before the flags that depend on it (the batch size), exits 2, and only
// rank 0 says so.
func TestPEsUnderMPI(t *testing.T) {
	for _, rank := range []int{0, 1} {
		t.Setenv("OMPI_COMM_WORLD_RANK", strconv.Itoa(rank))
		t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
		var stdout, stderr bytes.Buffer
		code := run([]string{"--pes", "3", "--dataset", "synthetic"}, &stdout, &stderr)
		want := "train: --pes 3 does not match the 4 processes mpirun started (drop --pes under mpirun)\nRun 'train --help' for the flags.\n"
		if rank != 0 {
			want = ""
		}
		if code != 2 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("rank %d: exit %d, stderr %q; want exit 2 and %q", rank, code, stderr.String(), want)
		}
		// --max-restarts is refused for being under mpirun, not first for
		// lacking the --checkpoint-dir that would not help either
		stdout.Reset()
		stderr.Reset()
		code = run([]string{"--max-restarts", "2", "--dataset", "synthetic"}, &stdout, &stderr)
		if want := "train: --max-restarts: under mpirun, mpirun starts and stops the PEs; run mpirun in a loop with --resume latest instead"; code != 2 ||
			(rank == 0) != strings.HasPrefix(stderr.String(), want) || (rank != 0 && stderr.Len() != 0) {
			t.Errorf("rank %d: --max-restarts: exit %d, stderr %q; want exit 2 and rank 0 saying %q", rank, code, stderr.String(), want)
		}
	}
}

// TestBadFlagUnderMPI: every rank of mpirun parses the same command line, so
// a flag that does not parse (an unknown flag, a value of the wrong type) is
// said by rank 0 alone, like the errors validate finds, and --help is
// printed once; before, each rank printed it (16 times at -np 16).
func TestBadFlagUnderMPI(t *testing.T) {
	for _, rank := range []int{0, 1} {
		t.Setenv("OMPI_COMM_WORLD_RANK", strconv.Itoa(rank))
		t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--bogus"}, "train: unknown flag: --bogus\nRun 'train --help' for the flags.\n"},
			{[]string{"--timeout", "soon"}, `train: invalid argument "soon" for "--timeout" flag`},
		} {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			ok := code == 2 && stdout.Len() == 0
			if rank == 0 {
				ok = ok && strings.HasPrefix(stderr.String(), tc.want) && strings.Count(stderr.String(), "\n") == 2
			} else {
				ok = ok && stderr.Len() == 0
			}
			if !ok {
				t.Errorf("rank %d: train %s: exit %d, stderr %q; want exit 2 and rank 0 alone saying %q",
					rank, strings.Join(tc.args, " "), code, stderr.String(), tc.want)
			}
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"--help"}, &stdout, &stderr)
		if printed := strings.Contains(stdout.String(), "Usage:"); code != 0 || printed != (rank == 0) || stderr.Len() != 0 {
			t.Errorf("rank %d: train --help: exit %d, stdout %d bytes, stderr %q; want exit 0 and the help from rank 0 alone",
				rank, code, stdout.Len(), stderr.String())
		}
	}
}

// TestBadLabelNamesUserFile: a label out of range is reported against the
// user's file, not the unpacked copy (which is gone by then).
func TestBadLabelNamesUserFile(t *testing.T) {
	dir := writeTinyIDX(t, 20, 10)
	labels := make([]byte, 10)
	labels[3] = 10 // Fashion-MNIST has classes 0-9
	raw := binary.BigEndian.AppendUint32([]byte{0, 0, 8, 1}, 10)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(append(raw, labels...))
	zw.Close()
	bad := filepath.Join(dir, "t10k-labels-idx1-ubyte.gz")
	os.WriteFile(bad, b.Bytes(), 0o644)

	var stdout, stderr bytes.Buffer
	code := run([]string{"--dataset", "fashion-mnist", "--data-dir", dir, "--batch-size", "4", "--max-steps", "1"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), bad) || strings.Contains(stderr.String(), "symddp-") {
		t.Fatalf("exit %d, stderr %q; want an error naming %s", code, stderr.String(), bad)
	}
}

// pePIDs returns the pids of the PEs that launcher pid has running now, by
// PE number (from their SYMDDP_PE).
func pePIDs(t *testing.T, pid int) map[int]int {
	t.Helper()
	out := map[int]int{}
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(b)) {
			child, _ := strconv.Atoi(f)
			env, _ := os.ReadFile(filepath.Join("/proc", f, "environ"))
			for _, kv := range strings.Split(string(env), "\x00") {
				if v, ok := strings.CutPrefix(kv, "SYMDDP_PE="); ok {
					pe, _ := strconv.Atoi(v)
					out[pe] = child
				}
			}
		}
	}
	return out
}

// TestStoppedPEIsNamed: a PE stopped with SIGSTOP makes the others miss the
// deadline; the one failure message names the stopped PE, never a healthy
// one, and is said once.
func TestStoppedPEIsNamed(t *testing.T) {
	j := newJob(t, "--pes", "3", "--batch-size", "63", "--timeout", "2s", "--log-every", "20")
	j.startAndWait(t, "step 20/")
	pids := pePIDs(t, j.cmd.Process.Pid)
	if pids[2] == 0 {
		j.cmd.Process.Kill()
		t.Fatalf("PE 2 not found among the launcher's children: %v", pids)
	}
	syscall.Kill(pids[2], syscall.SIGSTOP)
	j.code = exitCode(t, j.cmd.Wait())
	errs := j.stderr.String()
	if j.code != 1 || !strings.Contains(errs, "train: PE 2 stopped responding: PE ") ||
		strings.Count(errs, "PEs not arrived: [2]") != 1 || strings.Contains(errs, "failed") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and one message naming PE 2", j.code, errs)
	}
	j.clean(t)
}

// TestOneMessagePerFailure: a PE's error is printed once, by the launcher,
// and the PEs that fail because of it say nothing.
func TestOneMessagePerFailure(t *testing.T) {
	j := newJob(t, "--pes", "3", "--batch-size", "63", "--fault-inject", "pe=1,step=7,mode=nan").run(t)
	errs := j.stderr.String()
	if j.code != 1 || strings.Count(errs, "not finite") != 1 || !strings.Contains(errs, "train: PE ") {
		t.Fatalf("NaN: exit %d, stderr:\n%s\nwant exit 1 and the message once", j.code, errs)
	}
	k := newJob(t, "--pes", "3", "--batch-size", "63", "--fault-inject", "pe=2,step=5,mode=kill").run(t)
	errs = k.stderr.String()
	if k.code != 137 || strings.Count(errs, "PE 2 failed: killed by signal 9") != 1 || strings.Contains(errs, "exited while the others wait") {
		t.Fatalf("kill: exit %d, stderr:\n%s\nwant exit 137 and only PE 2's failure", k.code, errs)
	}
}

// TestSIGTERMExits143: SIGTERM stops the job like SIGINT, and exits with
// the shell's status for it, 128 + 15.
func TestSIGTERMExits143(t *testing.T) {
	j := newJob(t, "--pes", "2", "--log-every", "20")
	j.startAndWait(t, "step 20/")
	j.cmd.Process.Signal(syscall.SIGTERM)
	j.code = exitCode(t, j.cmd.Wait())
	if j.code != 143 || !strings.Contains(j.stdout.String(), "stopped by signal") ||
		!strings.Contains(j.stderr.String(), "train: stopped by SIGTERM") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 143", j.code, j.stdout.String(), j.stderr.String())
	}
	j.clean(t)
}

// TestSummaryWording: counts of one are singular.
func TestSummaryWording(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"--dataset", "synthetic", "--train-limit", "640", "--batch-size", "64", "--hidden", "16",
		"--max-steps", "10", "--eval-every", "0", "--no-progress"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "done: 10 steps (1 epoch) in ") ||
		!strings.Contains(stdout.String(), " on 1 PE (shm, ") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

// TestSharedErrorOncePerJob: under mpirun, an error every rank reaches
// together (a non-finite step, a checkpoint PE 0 could not write) is
// printed by rank 0 only; an error of a rank's own by every rank that has
// it. All of them exit 1.
func TestSharedErrorOncePerJob(t *testing.T) {
	saved := proc
	defer func() { proc = saved }()
	nonFinite := fmt.Errorf("step 7: %w; lower the learning rate", ddp.ErrNonFinite)
	notSaved := fmt.Errorf("%w at step 20 (PE 0 says): no space left on device", ddp.ErrCheckpointSave)
	own := errors.New("read /data/x: input/output error")
	for _, rank := range []int{0, 1} {
		proc = launch.Process{Role: launch.MPIRank}
		proc.MPI.Rank = rank
		for _, err := range []error{nonFinite, notSaved, finishedError{notSaved}, own} {
			var stderr bytes.Buffer
			code := fail(&stderr, err)
			want := "train: " + err.Error() + "\n"
			if rank != 0 && ddp.Shared(err) {
				want = ""
			}
			if code != 1 || stderr.String() != want {
				t.Errorf("rank %d, %v: exit %d, stderr %q; want exit 1 and %q", rank, err, code, stderr.String(), want)
			}
		}
	}
	if ddp.Shared(own) || !ddp.Shared(finishedError{nonFinite}) {
		t.Errorf("Shared: a rank's own error %v, a wrapped non-finite step %v", ddp.Shared(own), ddp.Shared(finishedError{nonFinite}))
	}
}

// TestCheckpointDirOfAnotherRun: a run started afresh in a directory that
// holds checkpoints would write over them and prune its own (the newest
// steps are kept, whoever wrote them): refused before any PE starts, the
// files left as they were; --resume latest is what the user meant or
// another directory. The directory is checked before the data, which may
// take minutes to tokenize, and one that the check created is removed
// when the run stops before its first checkpoint.
func TestCheckpointDirOfAnotherRun(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []string{"000000010", "000000020"} {
		os.WriteFile(filepath.Join(dir, "ckpt-"+step+".safetensors"), []byte("another run's"), 0o644)
	}
	j := newJob(t, append([]string{"--pes", "2", "--checkpoint-dir", dir}, short...)...).run(t)
	want := "train: --checkpoint-dir " + dir + ": it already holds checkpoints (2, the newest ckpt-000000020.safetensors), " +
		"which a run started afresh would overwrite and prune: add --resume latest to go on from there, or name another --checkpoint-dir"
	if lines := strings.Split(strings.TrimSpace(j.stderr.String()), "\n"); j.code != 2 || len(lines) != 1 || lines[0] != want {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and\n%s", j.code, j.stderr.String(), want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 2 {
		t.Fatalf("files after the refusal: %v", left)
	}

	// the checkpoint directory is looked at before the data
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	code, _, stderr := runTrain(t, nil, "--model", "gpt-tiny", "--data-dir", filepath.Join(dir, "none"), "--checkpoint-dir", filepath.Join(file, "ckpt"))
	if code != 2 || !strings.Contains(stderr, "--checkpoint-dir "+filepath.Join(file, "ckpt")+": cannot create it") {
		t.Fatalf("bad --checkpoint-dir and --data-dir: exit %d, stderr:\n%s\nwant the checkpoint directory's error", code, stderr)
	}
	// and what the check made is gone when the run stops before saving
	fresh := filepath.Join(t.TempDir(), "new", "ckpt")
	code, _, stderr = runTrain(t, nil, "--model", "gpt-tiny", "--data-dir", filepath.Join(dir, "none"), "--checkpoint-dir", fresh)
	if code != 2 || !strings.Contains(stderr, "--data-dir") {
		t.Fatalf("bad --data-dir: exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left behind by a run that never started (%v)", filepath.Dir(fresh), err)
	}
	// but a run that starts keeps it: its metrics file may live in it
	j = newJob(t, "--pes", "2", "--max-steps", "2", "--checkpoint-dir", fresh, "--metrics", filepath.Join(fresh, "m.jsonl")).run(t)
	if j.code != 0 {
		t.Fatalf("metrics in a new checkpoint directory: exit %d, stderr:\n%s", j.code, j.stderr.String())
	}
	for _, name := range []string{"m.jsonl", "ckpt-000000002.safetensors"} {
		if _, err := os.Stat(filepath.Join(fresh, name)); err != nil {
			t.Errorf("after the run: %v", err)
		}
	}
}
