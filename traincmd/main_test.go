package traincmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestUsageErrors: every bad command line is one line on stderr (plus the
// pointer to --help) and exit status 2, before any PE starts.
func TestUsageErrors(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pes", "0"}, "--pes 0: need at least 1 PE"},
		{[]string{"--pes", "-1"}, "--pes -1: need at least 1 PE"},
		{[]string{"--pes", "3", "--batch-size", "256"}, "--batch-size 256 is not a multiple of --pes 3 x --accumulate 1: use 255 or 258"},
		{[]string{"--model", "resnet9000"}, `--model "resnet9000": unknown model`},
		{[]string{"--dataset", "cifar"}, `--dataset "cifar"`},
		{[]string{"--optimizer", "lbfgs"}, `--optimizer "lbfgs"`},
		{[]string{"--lr", "-1"}, "--lr -1"},
		{[]string{"--epochs", "0"}, "--epochs 0"},
		{[]string{"--epochs", "-1", "--max-steps", "5"}, "--epochs -1: must not be negative"},
		// a size past int64 wrapped around to a small one and trained
		{[]string{"--heap-size", "17179869184GiB"}, `--heap-size "17179869184GiB": more than 8 EiB, the largest size a number here holds`},
		{[]string{"--eval-every", "-1"}, "--eval-every -1: must not be negative (0: at the end only)"},
		{[]string{"--sample-tokens", "-5"}, "--sample-tokens -5: must not be negative (0: no sample)"},
		{[]string{"--bucket-size", "lots"}, "--bucket-size"},
		{[]string{"--backend", "tcp"}, `--backend "tcp"`},
		{[]string{"--nesterov", "--momentum", "0"}, "--nesterov needs --momentum > 0"},
		{[]string{"--resume", "latest"}, "--resume latest needs --checkpoint-dir"},
		{[]string{"--max-restarts", "2"}, "--max-restarts needs --checkpoint-dir"},
		{[]string{"--max-restarts", "-1", "--checkpoint-dir", empty}, "--max-restarts -1"},
		{[]string{"--hidden", "256,x"}, "--hidden"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"--mps", "on"}, "--mps applies to the GPU (--backend nvshmem), not to --backend auto (the CPU)"},
		{[]string{"--backend", "shm", "--cuda-graph=false"}, "--cuda-graph applies to the GPU (--backend nvshmem), not to --backend shm (the CPU)"},
		{[]string{"--data-on-device", "on"}, "--data-on-device applies to the GPU"},
		{[]string{"--gpu-lib", "/x/libsymddp_cuda.so"}, "--gpu-lib applies to the GPU"},
		{[]string{"--sample-tokens", "10"}, "--sample-tokens: samples are printed by the language models, not by mlp"},
		{[]string{"--keep-checkpoints", "2"}, "--keep-checkpoints needs --checkpoint-dir"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != 2 {
			t.Errorf("train %s: exit %d, stderr %q; want exit 2 and one line containing %q (and the --help pointer)",
				strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
}

// TestHostMemoryRefusals: a model of ten million layers and a thousand
// PEs each with its own copy of the synthetic data are refused at once,
// with the estimate, instead of building for minutes or starting PEs that
// the kernel's out-of-memory killer then stops (with other processes).
func TestHostMemoryRefusals(t *testing.T) {
	avail := memAvailable()
	for _, tc := range []struct {
		args []string
		need int64 // bytes the refusal counts
		want string
	}{
		{[]string{"--model", "llama-tiny", "--layers", "10000000"}, 27504 << 30,
			"--layers 10000000: model llama-tiny's weights, gradients and optimizer state would take about 27504.0 GiB per PE (27504.0 GiB for 1 PE), more than the "},
		{[]string{"--pes", "1000", "--batch-size", "1000", "--dataset", "synthetic", "--max-steps", "1"}, 229 << 30,
			"--pes 1000: each PE takes about 234.6 MiB (its 9.0 MiB symmetric heap, its copy of the data and the program), 229.1 GiB for 1000 PEs, more than the "},
		// a heap larger than the host: fewer PEs would not help
		{[]string{"--pes", "2", "--heap-size", "100000GiB", "--max-steps", "1"}, 100000 << 30,
			"GiB this host has available: not even one PE fits: use a smaller --heap-size (this model needs about 9.0 MiB), or leave it unset to size the heap from the model"},
	} {
		if avail <= 0 || avail >= tc.need {
			t.Logf("train %s: not refused on a host with %d bytes available: not run", strings.Join(tc.args, " "), avail)
			continue
		}
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != 2 {
			t.Errorf("train %s: exit %d, stderr %q; want exit 2 and one line containing %q",
				strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
		t.Logf("train %s: refused in %v", strings.Join(tc.args, " "), time.Since(start))
	}
}

func TestHelpAndListModels(t *testing.T) {
	var stdout, stderr bytes.Buffer
	// on stdout, so that `train --help | less` shows it
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--pes") ||
		!strings.Contains(stdout.String(), "--max-restarts") || stderr.Len() != 0 {
		t.Fatalf("--help: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"--list-models"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "mlp ") ||
		!regexp.MustCompile(`gpt2 +124\.5M +31\.81 GiB at 16 samples a step, adamw; --recompute block: 10\.81 GiB +8\.44 GiB at 16 samples a step, adamw; --recompute block: 4\.56 GiB\n`).MatchString(stdout.String()) ||
		!regexp.MustCompile(`gpt2-xl +1\.56B `).MatchString(stdout.String()) {
		t.Fatalf("--list-models: exit %d, output %q", code, stdout.String())
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the train binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// trainBinary builds this command once per test run.
func trainBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "symddp-train-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "train")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/symddp/symddp/cmd/train").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build train: %v", buildErr)
	}
	return binPath
}

// TestTrainEndToEnd runs the binary with 2 PEs on synthetic data and checks
// the summary and the metrics file.
func TestTrainEndToEnd(t *testing.T) {
	bin := trainBinary(t)
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	cmd := exec.Command(bin, "--pes", "2", "--dataset", "synthetic", "--max-steps", "40", "--log-every", "10",
		"--batch-size", "64", "--hidden", "64", "--schedule", "constant", "--metrics", metrics)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("train: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"done: 40 steps", "test accuracy", "replicas identical on both PEs"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// the header says what optimizes
	if want := "recipe: sgd (momentum 0.9, no weight decay), lr 0.05, constant, no clipping, global batch 64 = 2 PEs x 32"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	b, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	var logs, finals int
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if _, ok := m["loss"]; ok {
			logs++
			if m["epoch"] != 1.0 { // 40 steps of the first epoch, which the console calls epoch 1 too
				t.Errorf("metrics line %q: epoch %v, want 1", line, m["epoch"])
			}
			for _, k := range []string{"step", "epoch", "accuracy", "samples_per_sec", "elapsed"} {
				if _, ok := m[k]; !ok {
					t.Errorf("metrics line %q lacks %q", line, k)
				}
			}
		}
		if m["final"] == true {
			finals++
			last = m
		}
	}
	if logs != 4 || finals != 1 {
		t.Fatalf("metrics: %d log lines and %d final lines, want 4 and 1:\n%s", logs, finals, b)
	}
	if acc := last["test_accuracy"].(float64); acc < 0.9 {
		t.Errorf("synthetic test accuracy %.3f after 40 steps, want >= 0.9", acc)
	}
}

// TestMorePEsThanCPUs: more shm PEs than CPUs still train, with one line
// that says what it costs; as many PEs as CPUs get no such line.
func TestMorePEsThanCPUs(t *testing.T) {
	bin := trainBinary(t)
	cpus := runtime.NumCPU()
	for _, pes := range []int{cpus + 1, min(cpus, 2)} {
		cmd := exec.Command(bin, "--pes", strconv.Itoa(pes), "--dataset", "synthetic", "--max-steps", "3",
			"--batch-size", strconv.Itoa(8*pes), "--hidden", "16", "--eval-every", "0", "--no-progress")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("train --pes %d: %v\nstderr:\n%s", pes, err, stderr.String())
		}
		note := fmt.Sprintf("note: %d PEs on %d CPUs take turns on them", pes, cpus)
		if got := strings.Contains(stderr.String(), note); got != (pes > cpus) {
			t.Errorf("train --pes %d on %d CPUs: note %q printed: %v, want %v\nstderr:\n%s", pes, cpus, note, got, pes > cpus, stderr.String())
		}
	}
}

// TestMissingData: an explicit dataset without its files is a usage error
// that says where to put them; the default dataset missing falls back to
// synthetic data with a notice that says how to install it.
func TestMissingData(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"--dataset", "mnist", "--data-dir", t.TempDir()}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "data directory") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}

	empty := t.TempDir()
	old := defaultDataDir
	defer func() { defaultDataDir = old }()
	defaultDataDir = func(string) (string, error) { return empty, nil }
	o, err := parseFlags(nil, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := chooseData(o)
	if err != nil {
		t.Fatal(err)
	}
	if dc.name != "synthetic" || !strings.Contains(dc.notice, "apt-get install dataset-fashion-mnist") ||
		!strings.Contains(dc.notice, "synthetic data instead") {
		t.Fatalf("fallback: %+v", dc)
	}
}

// TestBucketBytes: --bucket-size auto leaves ddp its defaults (1 MiB
// buckets on the host paths, one reduction after backward on the GPU step
// path), 0 asks for one reduction everywhere, a size for buckets of it.
func TestBucketBytes(t *testing.T) {
	for s, want := range map[string]int{"auto": 0, "AUTO": 0, "0": -1, "1MiB": 1 << 20, "64KiB": 64 << 10, "4096": 4096} {
		got, err := bucketBytes(s)
		if err != nil || got != want {
			t.Errorf("--bucket-size %s: %d, %v; want %d", s, got, err, want)
		}
	}
	if _, err := bucketBytes("lots"); err == nil || !strings.Contains(err.Error(), "--bucket-size") {
		t.Errorf("--bucket-size lots: %v", err)
	}
}

// Sizes take TiB and TB too, and a size past int64 is refused, not wrapped
// around to a small one.
func TestParseBytesUnits(t *testing.T) {
	for s, want := range map[string]int64{"1TiB": 1 << 40, "2TB": 2e12, "3T": 3 << 40, "64KiB": 64 << 10, "7": 7} {
		if got, err := parseBytes("--heap-size", s, false); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", s, got, err, want)
		}
	}
	if _, err := parseBytes("--heap-size", "8388608TiB", false); err == nil {
		t.Error("8 EiB in TiB taken")
	}
}

// A temporary directory that is not there is named as $TMPDIR's, where the
// launcher makes the job's run directory (the error named only the path).
func TestMissingTMPDIR(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	t.Setenv("TMPDIR", missing)
	var stdout, stderr bytes.Buffer
	code := run([]string{"--pes", "2", "--dataset", "synthetic", "--max-steps", "1", "--no-progress"}, &stdout, &stderr)
	if want := "launch: run directory in " + missing + " (the temporary directory: $TMPDIR): stat " + missing + ": no such file or directory"; code == 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want %q", code, stderr.String(), want)
	}
}
