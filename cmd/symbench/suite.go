package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/units"
)

// The all subcommand: every benchmark of issue 11 in one invocation, its
// tables in one markdown report and one PNG plot in an output directory.

// The entry is added in init: runSuite looks up other subcommands, so the
// table literal cannot name it.
func init() {
	register("all", "allreduce, train and, on a GPU host, gpu-train and (2 or more GPUs) gpu-allreduce: a report and a plot in a directory", runSuite)
}

// suiteOpts are the flags of `symbench all`.
type suiteOpts struct {
	out          string
	allreduce    []string // extra arguments of each step
	train        []string
	gpuTrain     []string
	gpuAllreduce []string
	torch        []string
	skip         []string
	scripts      string
	python       string
	symplot      string
}

func parseSuiteFlags(args []string) (suiteOpts, error) {
	var o suiteOpts
	fs := pflag.NewFlagSet("symbench all", pflag.ContinueOnError)
	fs.StringVar(&o.out, "out", "symbench-results", "directory for the report (REPORT.md), the tables and the plot (plot.json, drawn into symbench.png)")
	ar := fs.String("allreduce-args", "--reps 5", "arguments of 'symbench allreduce' (always --format markdown --json)")
	tr := fs.String("train-args", "", "arguments of 'symbench train' (always --format markdown --json)")
	gt := fs.String("gpu-train-args", "", "arguments of 'symbench gpu-train'")
	ga := fs.String("gpu-allreduce-args", "", "arguments of 'symbench gpu-allreduce' (more than one GPU)")
	th := fs.String("torch-args", "", "arguments of bench/torch_mlp_bench.py")
	fs.StringSliceVar(&o.skip, "skip", nil, "steps to leave out: allreduce, train, gpu")
	fs.StringVar(&o.scripts, "scripts", "", "directory of the reference scripts (default: bench/ of the module holding the working directory)")
	fs.StringVar(&o.python, "python", "python3", "Python for the PyTorch reference")
	fs.StringVar(&o.symplot, "symplot", "", "plotter binary (default: symplot beside symbench or on PATH, else 'go run' of bench/symplot in the module)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.allreduce, o.train, o.gpuTrain, o.gpuAllreduce, o.torch =
		strings.Fields(*ar), strings.Fields(*tr), strings.Fields(*gt), strings.Fields(*ga), strings.Fields(*th)
	for _, s := range o.skip {
		if s != "allreduce" && s != "train" && s != "gpu" {
			return o, fmt.Errorf("--skip %q: want allreduce, train or gpu", s)
		}
	}
	if o.scripts == "" {
		o.scripts = filepath.Join(moduleRoot(), "bench")
	}
	return o, nil
}

// moduleRoot is the nearest directory above the working directory that
// holds a go.mod, or "." when there is none.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	if root := cudalib.ModuleRoot(dir); root != "" {
		return root
	}
	return "."
}

// suite runs the steps and collects the report.
type suite struct {
	o       suiteOpts
	self    string
	report  bytes.Buffer
	failed  []error
	cpuSecs float64 // CPU time of the steps' processes
}

func runSuite(args []string) error {
	o, err := parseSuiteFlags(args)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	s := &suite{o: o, self: self}
	t0 := time.Now()
	work := startHostWork()
	load0 := loadAverage()
	gpus, gpuNote := countGPUs()

	r := &s.report
	fmt.Fprintf(r, "# symbench all: %s\n\n", t0.Format("2006-01-02 15:04 MST"))
	host, _ := os.Hostname()
	fmt.Fprintf(r, "- host: %s: %s\n", host, describeHost(nil))
	fmt.Fprintf(r, "- GPUs: %s\n", gpuNote)
	fmt.Fprintf(r, "- command: symbench %s\n\n", strings.Join(append([]string{"all"}, args...), " "))

	var ar []busbwPoint
	if s.skipped("allreduce") {
		fmt.Fprintf(r, "## (a) allreduce: skipped (--skip)\n\n")
	} else {
		fmt.Fprintf(r, "## (a) allreduce busbw: shm beside Open MPI's MPI_Allreduce\n\n")
		js := filepath.Join(o.out, "allreduce.json")
		if _, err := s.step("allreduce", append([]string{"allreduce", "--format", "markdown", "--json", js}, o.allreduce...), "allreduce.md"); err == nil {
			var rep allReduceJSON
			if b, err := os.ReadFile(js); err != nil {
				s.fail("allreduce", err)
			} else if err := json.Unmarshal(b, &rep); err != nil {
				s.fail("allreduce", fmt.Errorf("%s: %w", js, err))
			} else if ar, err = rep.busbwPoints(); err != nil {
				s.fail("allreduce", fmt.Errorf("%s: %w", js, err))
			}
		}
	}

	var tr *cpuTrainReport
	if s.skipped("train") {
		fmt.Fprintf(r, "## (b) training: skipped (--skip)\n\n")
	} else {
		fmt.Fprintf(r, "## (b) training samples/s of mlp at --pes 1, 2, 4, 8\n\n")
		js := filepath.Join(o.out, "train.json")
		if _, err := s.step("train", append([]string{"train", "--format", "markdown", "--json", js}, o.train...), "train.md"); err == nil {
			var rep cpuTrainReport
			if b, err := os.ReadFile(js); err != nil {
				s.fail("train", err)
			} else if err := json.Unmarshal(b, &rep); err != nil {
				s.fail("train", fmt.Errorf("%s: %w", js, err))
			} else {
				tr = &rep
			}
		}
	}

	s.gpuSteps(gpus, gpuNote)

	plotPath, specPath := filepath.Join(o.out, "symbench.png"), filepath.Join(o.out, "plot.json")
	fig := suiteFigure(ar, tr)
	if err := fig.Check(); err != nil {
		s.fail("plot", err)
	} else if err := fig.Write(specPath); err != nil {
		s.fail("plot", err)
	} else if err := drawFigure(o.symplot, specPath, plotPath); errors.Is(err, errNoSymplot) {
		fmt.Fprintf(r, "## Plot\n\nnot drawn: %v\n\n", err)
		fmt.Fprintf(os.Stderr, "symbench all: plot: %v\n", err)
	} else if err != nil {
		s.fail("plot", err)
	} else {
		fmt.Fprintf(r, "## Plot\n\n![allreduce busbw and training samples/s](symbench.png)\n\n`%s`\n\n", plotPath)
	}

	fmt.Fprintf(r, "## Load\n\n")
	wall := time.Since(t0).Seconds()
	line := fmt.Sprintf("1-minute load average %.1f at the start, %.1f at the end; %.0f s in all", load0, loadAverage(), wall)
	if other, ok := work.otherCPUs(s.cpuSecs, wall); ok {
		line += fmt.Sprintf("; other processes kept %.2f CPUs busy on average", other)
	}
	fmt.Fprintf(r, "%s.\n", line)
	if len(s.failed) > 0 {
		fmt.Fprintf(r, "\n## Failures\n\n")
		for _, err := range s.failed {
			fmt.Fprintf(r, "- %v\n", err)
		}
	}
	reportPath := filepath.Join(o.out, "REPORT.md")
	if err := os.WriteFile(reportPath, r.Bytes(), 0o644); err != nil {
		return err
	}
	os.Stdout.Write(r.Bytes())
	fmt.Fprintf(os.Stderr, "symbench all: wrote %s, %s and the tables in %s\n", reportPath, plotPath, o.out)
	return errors.Join(s.failed...)
}

func (s *suite) skipped(step string) bool { return slices.Contains(s.o.skip, step) }

// fail records a failed step; the others still run.
func (s *suite) fail(step string, err error) {
	err = fmt.Errorf("%s: %w", step, err)
	s.failed = append(s.failed, err)
	fmt.Fprintf(&s.report, "**failed:** %v\n\n", firstLine(err.Error()))
	fmt.Fprintf(os.Stderr, "symbench all: %v\n", err)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// step runs this binary with args, shows its stderr, saves its stdout in
// the output directory as file and in the report, and returns it.
func (s *suite) step(name string, args []string, file string) (string, error) {
	return s.run(name, exec.Command(s.self, args...), file, "")
}

// run runs cmd as a step (see step); fence is the code-block language for
// its output in the report ("" pastes it as markdown).
func (s *suite) run(name string, cmd *exec.Cmd, file, fence string) (string, error) {
	fmt.Fprintf(os.Stderr, "symbench all: %s: %s\n", name, strings.Join(cmd.Args, " "))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState != nil {
		if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			s.cpuSecs += tvSeconds(u.Utime) + tvSeconds(u.Stime)
		}
	}
	if werr := os.WriteFile(filepath.Join(s.o.out, file), out.Bytes(), 0o644); werr != nil && err == nil {
		err = werr
	}
	if fence != "" {
		fmt.Fprintf(&s.report, "```%s\n%s```\n\n", fence, out.String())
	} else {
		fmt.Fprintf(&s.report, "%s\n", out.String())
	}
	if err != nil {
		s.fail(name, err)
		return out.String(), err
	}
	return out.String(), nil
}

// gpuSteps runs (c) and (d) where the host has the GPUs they need, and says
// in one line why a step was skipped.
func (s *suite) gpuSteps(gpus int, note string) {
	r := &s.report
	switch {
	case s.skipped("gpu"):
		fmt.Fprintf(r, "## (c), (d) GPU: skipped (--skip)\n\n")
		return
	case gpus < 2:
		fmt.Fprintf(r, "## (c) fused GPU allreduce beside NCCL: skipped: needs more than one GPU (%s)\n\n", note)
	default:
		fmt.Fprintf(r, "## (c) fused GPU allreduce beside NCCL, %d GPUs\n\n", gpus)
		pes := []string{}
		for n := 2; n <= gpus; n *= 2 {
			pes = append(pes, strconv.Itoa(n))
		}
		results := filepath.Join(s.o.out, "gpu-allreduce-results.txt")
		os.Remove(results) // --results appends
		args := append([]string{"gpu-allreduce", "--format", "markdown", "--pes", strings.Join(pes, ","),
			"--results", results}, s.o.gpuAllreduce...)
		s.step("gpu-allreduce", args, "gpu-allreduce.md")
		if script := filepath.Join(s.o.scripts, "nccl_allreduce_bench.py"); fileExists(script) {
			theirs, _ := s.run("nccl", exec.Command(s.o.python, script), "nccl-allreduce.txt", "text")
			ours, _ := os.ReadFile(results)
			if rows := compareAllReduceResults(string(ours), theirs); len(rows) > 0 {
				fmt.Fprintf(r, "side by side (busbw = S·2(N−1)/N / time; symddp: algorithm auto):\n\n")
				writeTable(r, "markdown", 2, []string{"GPUs", "size", "symddp time", "NCCL time",
					"symddp busbw", "NCCL busbw", "symddp/NCCL"}, rows)
				fmt.Fprintln(r)
			}
		} else {
			fmt.Fprintf(r, "NCCL: skipped: no %s\n\n", script)
		}
	}
	if gpus < 1 {
		fmt.Fprintf(r, "## (d) GPU training beside PyTorch: skipped: no GPU (%s)\n\n", note)
		return
	}
	fmt.Fprintf(r, "## (d) GPU training beside PyTorch\n\n")
	var theirs string
	ours, _ := s.run("gpu-train", exec.Command(s.self, append([]string{"gpu-train"}, s.o.gpuTrain...)...), "gpu-train.txt", "text")
	if script := filepath.Join(s.o.scripts, "torch_mlp_bench.py"); fileExists(script) {
		theirs, _ = s.run("torch", exec.Command(s.o.python, append([]string{script}, s.o.torch...)...), "torch.txt", "text")
	} else {
		fmt.Fprintf(r, "PyTorch: skipped: no %s\n\n", script)
	}
	if rows := compareGPUResults(ours, theirs); len(rows) > 0 {
		fmt.Fprintf(r, "side by side (samples/s; symddp's train gathers a new batch every step, as PyTorch's fed step does, while PyTorch's eager and graph train on one batch resident on the GPU: the ratio is symddp graph over PyTorch fed):\n\n")
		writeTable(r, "markdown", 2, []string{"model", "batch", "symddp eager", "symddp graph", "torch eager (resident batch)", "torch graph (resident batch)", "torch fed", "symddp graph / torch fed"}, rows)
		fmt.Fprintln(r)
	}
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// countGPUs is the number of GPUs the GPU steps can use (launch.GPUCount,
// with nvidia-smi -L's list as the last resort), and a line saying so.
func countGPUs() (int, string) {
	names, smiErr := nvidiaSMIList()
	n, err := launch.GPUCount(func() (int, error) { return len(names), smiErr })
	if err != nil {
		return 0, err.Error()
	}
	note := fmt.Sprintf("%d GPUs", n)
	if n == 1 {
		note = "1 GPU"
	}
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		note += " (CUDA_VISIBLE_DEVICES=" + v + ")"
	} else if len(names) > 0 {
		note += ": " + names[0]
		if len(names) > 1 {
			note += ", ..."
		}
	}
	return n, note
}

// nvidiaSMIList is the GPUs nvidia-smi -L lists, all of the host's.
func nvidiaSMIList() ([]string, error) {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, errors.New("no nvidia-smi on this host")
	}
	out, err := exec.Command(smi, "-L").Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi -L: %v", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "GPU ") {
			names = append(names, line)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("nvidia-smi lists no GPU")
	}
	return names, nil
}

// allReduceLine matches the RESULT lines of gpu-allreduce --results (pes=)
// and of bench/nccl_allreduce_bench.py (gpus=).
var allReduceLine = regexp.MustCompile(`^RESULT (\S+) (?:pes|gpus)=(\d+) bytes=(\d+) time_us=([\d.]+) busbw_gbs=([\d.]+)`)

// compareAllReduceResults puts symddp's and NCCL's allreduce RESULT lines
// side by side: one row per job size and buffer size that both measured,
// in the order of symddp's lines, with the ratio of the bus bandwidths.
func compareAllReduceResults(ours, theirs string) [][]string {
	type key struct{ n, bytes string }
	type val struct{ us, gbs float64 }
	parse := func(out string) (map[key]val, []key) {
		m := map[key]val{}
		var order []key
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			f := allReduceLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
			if f == nil {
				continue
			}
			us, err1 := strconv.ParseFloat(f[4], 64)
			gbs, err2 := strconv.ParseFloat(f[5], 64)
			if err1 != nil || err2 != nil || us <= 0 {
				continue
			}
			k := key{f[2], f[3]}
			if _, seen := m[k]; !seen {
				order = append(order, k)
			}
			m[k] = val{us, gbs}
		}
		return m, order
	}
	a, order := parse(ours)
	b, _ := parse(theirs)
	var rows [][]string
	for _, k := range order {
		o, ok := b[k]
		if !ok {
			continue
		}
		bytes, _ := strconv.ParseInt(k.bytes, 10, 64)
		p := a[k]
		ratio := "-"
		if o.gbs > 0 {
			ratio = fmt.Sprintf("%.2f×", p.gbs/o.gbs)
		}
		rows = append(rows, []string{k.n, units.Bytes(bytes), formatTime(p.us / 1e6), formatTime(o.us / 1e6),
			fmt.Sprintf("%.1f GB/s", p.gbs), fmt.Sprintf("%.1f GB/s", o.gbs), ratio})
	}
	return rows
}

// resultLine matches the machine-readable lines of gpu-train and of
// bench/torch_mlp_bench.py, whose lines also have fed=: a new batch every
// step, gathered on the GPU, where its eager and graph train on one
// resident batch.
var resultLine = regexp.MustCompile(`^RESULT (\S+) model=(\S+) batch=(\d+) eager=([\d.]+) graph=([\d.]+)(?: fed=([\d.]+))?`)

// compareGPUResults puts the RESULT lines of symddp's and PyTorch's GPU
// training benchmarks side by side, one row per model and batch. The ratio
// is the one of the same work: symddp's graph step (train: a new batch
// every step through ddp's data pipeline, replayed from a CUDA graph) over
// PyTorch's fed step (a new batch every step, replayed from a CUDA graph);
// PyTorch's eager and graph, which train on one batch resident on the GPU,
// are shown but not compared.
func compareGPUResults(ours, theirs string) [][]string {
	type key struct{ model, batch string }
	vals := map[key]map[string]float64{}
	var order []key
	for _, out := range []string{ours, theirs} {
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			m := resultLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
			if m == nil {
				continue
			}
			k := key{m[2], m[3]}
			if vals[k] == nil {
				vals[k] = map[string]float64{}
				order = append(order, k)
			}
			vals[k][m[1]+" eager"], _ = strconv.ParseFloat(m[4], 64)
			vals[k][m[1]+" graph"], _ = strconv.ParseFloat(m[5], 64)
			if m[6] != "" {
				vals[k][m[1]+" fed"], _ = strconv.ParseFloat(m[6], 64)
			}
		}
	}
	cell := func(v float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", v)
	}
	var rows [][]string
	for _, k := range order {
		v := vals[k]
		ratio := "-"
		if ours, theirs := v["symddp graph"], v["torch fed"]; ours > 0 && theirs > 0 {
			ratio = fmt.Sprintf("%.2f×", ours/theirs)
		}
		rows = append(rows, []string{k.model, k.batch, cell(v["symddp eager"]), cell(v["symddp graph"]),
			cell(v["torch eager"]), cell(v["torch graph"]), cell(v["torch fed"]), ratio})
	}
	return rows
}
