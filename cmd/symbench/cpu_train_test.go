package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTimedWindow: samples are counted window by window from train's
// metrics log, and the step time is the window's duration over its steps.
func TestTimedWindow(t *testing.T) {
	log := `{"step":10,"epoch":0,"loss":2.1,"accuracy":0.2,"samples_per_sec":1000,"elapsed":1.5,"lr":0.05}
{"step":20,"epoch":0,"loss":1.1,"accuracy":0.6,"samples_per_sec":2560,"elapsed":2.5,"lr":0.05}
{"step":30,"epoch":0,"loss":0.9,"accuracy":0.7,"samples_per_sec":1280,"elapsed":4.5,"lr":0.05}
{"step":30,"epoch":0,"test_loss":0.8,"test_accuracy":0.7,"elapsed":4.9}
{"final":true,"step":30,"test_loss":0.8,"test_accuracy":0.7,"samples_per_sec":900,"elapsed":4.5,"replicas_identical":true}
`
	sps, step, err := timedWindow(strings.NewReader(log), 10, 30)
	if err != nil {
		t.Fatal(err)
	}
	// 2560 samples in 1 s, then 2560 in 2 s: 5120 samples in 3 s, 20 steps.
	if math.Abs(sps-5120.0/3) > 1e-9 || math.Abs(step-3.0/20) > 1e-12 {
		t.Errorf("timedWindow = %v samples/s, %v s/step; want %v and %v", sps, step, 5120.0/3, 3.0/20)
	}
	if _, _, err := timedWindow(strings.NewReader(log), 10, 40); err == nil || !strings.Contains(err.Error(), "no logs at steps 10 and 40") {
		t.Errorf("missing step: error %v", err)
	}
	if _, _, err := timedWindow(strings.NewReader("not json\n"), 10, 30); err == nil {
		t.Error("a bad line was accepted")
	}
}

func TestParseKB(t *testing.T) {
	status := "Name:\ttrain\nVmHWM:\t   81234 kB\nVmRSS:\t   80000 kB\nRssAnon:\t    6000 kB\nRssFile:\t   70000 kB\nRssShmem:\t    4000 kB\n"
	var m peMemory
	parseKB([]byte(status), map[string]*int64{"VmHWM": &m.HWM, "VmRSS": &m.RSS, "RssAnon": &m.Anon, "RssFile": &m.File, "RssShmem": &m.Shmem})
	if want := (peMemory{HWM: 81234 << 10, RSS: 80000 << 10, Anon: 6000 << 10, File: 70000 << 10, Shmem: 4000 << 10}); m != want {
		t.Errorf("parsed %+v, want %+v", m, want)
	}
}

// TestMemSamplerSelf samples this test process, which has no PE children:
// it counts as PE 0.
func TestMemSamplerSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := startMemSampler(os.Getpid(), 10*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	got := s.finish()
	m, ok := got[0]
	if len(got) != 1 || !ok || m.HWM <= 0 || m.PSS <= 0 || m.RSS <= 0 || m.HWM < m.RSS || m.Sample < 1 {
		t.Errorf("samples of this process: %+v", got)
	}
}

func TestCPUTrainJobs(t *testing.T) {
	o, err := parseCPUTrainFlags([]string{"--pes", "1,2,4", "--buckets", "default,0"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := o.jobs()
	want := []cpuTrainJob{{PEs: 1, Threads: 1}}
	if n := runtime.NumCPU(); n > 1 {
		want = append(want, cpuTrainJob{PEs: 1, Threads: n})
	}
	want = append(want, cpuTrainJob{PEs: 2}, cpuTrainJob{PEs: 2, Bucket: "0"}, cpuTrainJob{PEs: 4}, cpuTrainJob{PEs: 4, Bucket: "0"})
	if !slices.Equal(jobs, want) {
		t.Errorf("jobs %+v, want %+v", jobs, want)
	}
	for _, bad := range [][]string{{"--pes", "3"}, {"--steps", "25", "--warmup", "10"}, {"--reps", "0"}, {"--format", "html"}, {"--dataset", "cifar"}} {
		if _, err := parseCPUTrainFlags(bad); err == nil {
			t.Errorf("flags %v accepted", bad)
		}
	}
}

// TestPerPEBatch: --per-pe-batch gives each job a global batch of its PEs
// times the batch per PE (weak scaling) and lifts --batch-size's divisor rule.
func TestPerPEBatch(t *testing.T) {
	o, err := parseCPUTrainFlags([]string{"--pes", "1,3,8", "--per-pe-batch", "100"})
	if err != nil {
		t.Fatal(err)
	}
	for pes, want := range map[int]int{1: 100, 3: 300, 8: 800} {
		if got := o.globalBatch(pes); got != want {
			t.Errorf("--per-pe-batch 100, %d PEs: global batch %d, want %d", pes, got, want)
		}
		if cmd := cpuTrainCommand(cpuTrainJob{PEs: pes}, o); !strings.Contains(cmd, fmt.Sprintf("--batch-size %d ", want)) {
			t.Errorf("command %q: want --batch-size %d", cmd, want)
		}
	}
	o, err = parseCPUTrainFlags([]string{"--pes", "1,2", "--batch-size", "64"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.globalBatch(2); got != 64 {
		t.Errorf("--batch-size 64, 2 PEs: global batch %d, want 64", got)
	}
	if _, err := parseCPUTrainFlags([]string{"--per-pe-batch", "-1"}); err == nil {
		t.Error("--per-pe-batch -1 accepted")
	}
}

// fakeReport is a report of one- and two-PE runs with known numbers.
func fakeReport() cpuTrainReport {
	run := func(sps float64, pss int64) cpuTrainRun {
		return cpuTrainRun{SamplesPerSec: sps, StepSeconds: 256 / sps, Memory: map[int]peMemory{0: {HWM: 80 << 20, PSS: pss, Anon: 7 << 20}}}
	}
	noisy := run(40000, 78<<20)
	noisy.OtherCores = 1
	return cpuTrainReport{Params: 269322, Batch: 256, CPUs: 2, Engine: "shm, cpu/openblas", Dataset: "fashion-mnist", Reps: 3, Quiet: 0.25,
		TargetB: 3*4*269322 + 4*256*784 + 64<<20,
		Results: []cpuTrainResult{
			{Job: cpuTrainJob{PEs: 1, Threads: 1}, Runs: []cpuTrainRun{run(50000, 78<<20), noisy, run(52000, 78<<20)}},
			{Job: cpuTrainJob{PEs: 1, Threads: 2}, Runs: []cpuTrainRun{run(60000, 78<<20)}},
			{Job: cpuTrainJob{PEs: 2}, Runs: []cpuTrainRun{run(90000, 40<<20), run(85000, 41<<20), run(95000, 40<<20)}},
			{Job: cpuTrainJob{PEs: 2, Bucket: "0"}, Runs: []cpuTrainRun{run(80000, 40<<20)}},
		}}
}

// TestTrainVerdicts: the speed-up is the medians' ratio, against the
// one-thread baseline; memory is judged by PSS and VmHWM.
func TestTrainVerdicts(t *testing.T) {
	rep := fakeReport()
	v := strings.Join(rep.verdicts(), "\n")
	for _, want := range []string{
		"1 BLAS thread, the same compute per PE): 1.80x: met", // 90000 / 50000
		"against --pes 1 with 2 threads (train's default): 1.50x",
		"--pes 2: PSS 41.0 MiB met, VmHWM 80.0 MiB NOT met",
		"--pes 1 (1 thr): PSS 78.0 MiB NOT met",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("verdicts lack %q:\n%s", want, v)
		}
	}
	var out bytes.Buffer
	if err := printTrainReport(&out, "markdown", rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 2 | 1 | 3 | 90000 | 85000–95000 |", "| 2 | 2.84 ms (n=3) | 3.20 ms (n=1) | -11.1% |",
		"Quiet runs only", "| 1 | 1 | 2 | 51000 | 50000–52000 |", "1.76x: met"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// a host busy before the first run gets no speed verdict (the memory
	// ones stand)
	rep.StartLoad = 0.8
	v = strings.Join(rep.verdicts(), "\n")
	for _, want := range []string{"1.80x: no verdict (load average 0.80 before the first run, above 0.3: run again when nothing else runs)",
		"--pes 2: PSS 41.0 MiB met"} {
		if !strings.Contains(v, want) {
			t.Errorf("verdicts on a busy host lack %q:\n%s", want, v)
		}
	}
}

// TestCPUTrainRealRun runs the real train command for a few steps on two
// PEs and checks that its output is what symbench reads.
func TestCPUTrainRealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cmd/train")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	bin, cleanup, err := buildTrainBinary("")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	o, err := parseCPUTrainFlags([]string{"--dataset", "synthetic", "--warmup", "2", "--steps", "4", "--batch-size", "32",
		"--train-args", "--train-limit 512 --hidden 16"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := runCPUTrainJob(context.Background(), bin, cpuTrainJob{PEs: 2, Bucket: "0"}, o)
	if err != nil {
		t.Fatal(err)
	}
	if run.SamplesPerSec <= 0 || run.StepSeconds <= 0 || run.Params != 784*16+16+16*10+10 || run.Engine == "" || run.CPUSeconds <= 0 {
		t.Errorf("run %+v", run)
	}
	// The PEs may live too briefly to be sampled on a loaded machine; what
	// was sampled must be the PEs, not the launcher.
	for pe, m := range run.Memory {
		if pe < 0 || pe > 1 || m.HWM <= 0 {
			t.Errorf("memory of PE %d: %+v", pe, m)
		}
	}
}

// TestQuietFlag: --quiet NaN, Inf or below 0 is refused, naming the value
// (NaN used to make no run quiet, silently).
func TestQuietFlag(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"nan", "--quiet NaN: want a finite number"}, {"inf", "--quiet +Inf: want a finite number"},
		{"-1", "--quiet -1: want a number of CPUs, 0 or more"},
	} {
		if _, err := parseCPUTrainFlags([]string{"--quiet", c.arg}); err == nil || err.Error() != c.want {
			t.Errorf("--quiet %s: error %v, want %q", c.arg, err, c.want)
		}
	}
	if o, err := parseCPUTrainFlags([]string{"--quiet", "0"}); err != nil || o.quiet != 0 {
		t.Errorf("--quiet 0: %+v, %v; want quiet 0", o.quiet, err)
	}
}
