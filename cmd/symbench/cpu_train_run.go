package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTrainJob is one configuration of `symbench train`: a train command line.
type cpuTrainJob struct {
	PEs     int    `json:"pes"`
	Threads int    `json:"threads"` // BLAS threads per PE; 0: train's default (cores / PEs)
	Bucket  string `json:"bucket"`  // "": train's default (sharded update); else the replicated update with this --bucket-size
}

// label names the job in tables.
func (j cpuTrainJob) label() string {
	s := strconv.Itoa(j.PEs)
	if j.Threads > 0 {
		s += fmt.Sprintf(" (%d thr)", j.Threads)
	}
	return s
}

// cpuTrainRun is what one run of a job measured.
type cpuTrainRun struct {
	SamplesPerSec float64          `json:"samples_per_sec"` // over the timed steps
	StepSeconds   float64          `json:"step_seconds"`    // mean time of a timed step
	Memory        map[int]peMemory `json:"memory"`          // by PE
	CPUSeconds    float64          `json:"cpu_seconds"`     // user+system of the job's processes
	WallSeconds   float64          `json:"wall_seconds"`    // of the whole command
	OtherCores    float64          `json:"other_cores"`     // mean CPUs busy with other processes meanwhile
	Load          float64          `json:"load"`            // 1-minute load average at the start
	Params        int              `json:"params"`
	Engine        string           `json:"engine"`
}

// trainHeaderLine matches PE 0's first line: "training mlp: 269322 parameters,
// 2 PEs (shm, cpu/openblas), ..." ("1 PE" for one).
var trainHeaderLine = regexp.MustCompile(`training \S+: (\d+) parameters, \d+ PEs? \(([^)]*)\)`)

// trainArgs are the arguments of the train command a job runs, its metrics
// log written to metricsPath.
func trainArgs(job cpuTrainJob, o cpuTrainOpts, metricsPath string) []string {
	args := []string{"--pes", strconv.Itoa(job.PEs), "--batch-size", strconv.Itoa(o.globalBatch(job.PEs)),
		"--max-steps", strconv.Itoa(o.warmup + o.steps), "--log-every", strconv.Itoa(o.warmup),
		"--eval-every", "0", "--epochs", "1000000", "--no-progress", "--metrics", metricsPath, "--dataset", o.dataset}
	if job.Threads > 0 {
		args = append(args, "--threads", strconv.Itoa(job.Threads))
	}
	if job.Bucket != "" {
		args = append(args, "--shard-update=false", "--bucket-size", job.Bucket)
	}
	return append(args, o.extraArgs...)
}

// runCPUTrainJob runs the train binary once for job and measures it: samples/s
// and step time over steps timed after warmup steps (from the --metrics log
// written every warmup steps), the PEs' memory sampled from /proc, and the
// CPU time left to other processes.
func runCPUTrainJob(ctx context.Context, bin string, job cpuTrainJob, o cpuTrainOpts) (cpuTrainRun, error) {
	dir, err := os.MkdirTemp("", "symbench-train-")
	if err != nil {
		return cpuTrainRun{}, err
	}
	defer os.RemoveAll(dir)
	metrics := filepath.Join(dir, "metrics.jsonl")
	run, _, err := runTrainProcess(ctx, bin, dir, trainArgs(job, o, metrics), o.timeout)
	if err != nil {
		return run, err
	}
	f, err := os.Open(metrics)
	if err != nil {
		return run, fmt.Errorf("metrics of %s: %w", job.label(), err)
	}
	defer f.Close()
	run.SamplesPerSec, run.StepSeconds, err = timedWindow(f, o.warmup, o.warmup+o.steps)
	if err != nil {
		return run, fmt.Errorf("metrics of %s: %w", job.label(), err)
	}
	return run, nil
}

// runTrainProcess runs the train binary once with args in dir, within
// timeout (then it is interrupted), and measures the process tree: the PEs'
// memory sampled from /proc every 200 ms, the job's CPU time, the CPU time
// other processes used meanwhile, and the parameters and engine from PE 0's
// header line. It returns the run (without the throughput, which the
// caller reads from the metrics log it asked for) and train's stderr. env
// is added to this process's environment for train.
func runTrainProcess(ctx context.Context, bin, dir string, args []string, timeout time.Duration, env ...string) (cpuTrainRun, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second

	work := startHostWork()
	run := cpuTrainRun{Load: loadAverage()}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return run, "", err
	}
	s := startMemSampler(cmd.Process.Pid, 200*time.Millisecond)
	err := cmd.Wait()
	run.Memory = s.finish()
	run.WallSeconds = time.Since(t0).Seconds()
	if err != nil {
		return run, stderr.String(), fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, tail(stderr.String(), 20))
	}
	if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// The launcher waited for its PEs, so their times are in its own.
		run.CPUSeconds = tvSeconds(u.Utime) + tvSeconds(u.Stime)
	}
	run.OtherCores, _ = work.otherCPUs(run.CPUSeconds, run.WallSeconds)
	if m := trainHeaderLine.FindStringSubmatch(stderr.String()); m != nil {
		run.Params, _ = strconv.Atoi(m[1])
		run.Engine = m[2]
	}
	return run, stderr.String(), nil
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// metricsLine is one JSON line of train --metrics: a log window (step,
// elapsed seconds since training started, samples/s over the window).
type metricsLine struct {
	Step          int      `json:"step"`
	Elapsed       float64  `json:"elapsed"`
	SamplesPerSec *float64 `json:"samples_per_sec"`
	Final         bool     `json:"final"`
}

// timedWindow reads train's metrics log and returns the samples/s and the
// mean step time between the log at step from and the log at step to.
// Samples are counted window by window (samples/s times the window's
// duration), so a partial last batch of an epoch counts what it holds.
func timedWindow(r io.Reader, from, to int) (samplesPerSec, stepSeconds float64, err error) {
	sc := bufio.NewScanner(r)
	var logs []metricsLine
	for sc.Scan() {
		var m metricsLine
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return 0, 0, fmt.Errorf("bad metrics line %q: %w", sc.Text(), err)
		}
		if m.Final || m.SamplesPerSec == nil {
			continue // the summary, or a test evaluation
		}
		logs = append(logs, m)
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	start := -1
	for i, m := range logs {
		if m.Step == from {
			start = i
		}
		if m.Step == to && start >= 0 && i > start {
			var samples float64
			for k := start + 1; k <= i; k++ {
				samples += *logs[k].SamplesPerSec * (logs[k].Elapsed - logs[k-1].Elapsed)
			}
			d := m.Elapsed - logs[start].Elapsed
			if d <= 0 {
				return 0, 0, errors.New("the timed steps took no time")
			}
			return samples / d, d / float64(to-from), nil
		}
	}
	return 0, 0, fmt.Errorf("no logs at steps %d and %d among %d lines", from, to, len(logs))
}
