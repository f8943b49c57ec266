package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// gptTrainRun is one train run of `symbench gpt-cpu`.
type gptTrainRun struct {
	Run          cpuTrainRun // memory, load; SamplesPerSec in sequences
	TokensPerSec float64     // over the timed steps
	Sharded      bool        // the optimizer state was sharded over the PEs (ZeRO-1)
}

// torchGPTLine is one "torch-gpt ..." line of bench/torch_gpt_cpu_bench.py.
type torchGPTLine struct {
	Model        string
	Params       int
	Ranks        int
	BatchPerRank int
	Context      int
	Steps        int
	TokensPerSec float64
	MsPerStep    float64
	Loss         float64
	PeakRSSMiB   []float64 // by rank
}

// parseTorchGPTOutput reads the script's stdout: its "torch-gpt" lines and
// its "# torch VERSION, ..." header (returned as the version, "" when
// missing). A torch-gpt line that lacks a field or has a bad value is an
// error; other lines are ignored.
func parseTorchGPTOutput(out string) ([]torchGPTLine, string, error) {
	var lines []torchGPTLine
	version := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(text, "# torch "); ok && version == "" {
			version, _, _ = strings.Cut(v, ",")
			continue
		}
		rest, ok := strings.CutPrefix(text, "torch-gpt ")
		if !ok {
			continue
		}
		l, err := parseTorchGPTFields(rest)
		if err != nil {
			return nil, version, fmt.Errorf("line %q: %w", text, err)
		}
		lines = append(lines, l)
	}
	return lines, version, sc.Err()
}

// parseTorchGPTFields reads the key=value fields of a torch-gpt line.
func parseTorchGPTFields(s string) (torchGPTLine, error) {
	kv := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return torchGPTLine{}, fmt.Errorf("field %q is not key=value", f)
		}
		kv[k] = v
	}
	var l torchGPTLine
	var err error
	need := func(k string) string {
		v, ok := kv[k]
		if !ok && err == nil {
			err = fmt.Errorf("no %s field", k)
		}
		return v
	}
	atoi := func(k string, dst *int) {
		if v := need(k); err == nil {
			if *dst, err = strconv.Atoi(v); err != nil {
				err = fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	atof := func(k string, dst *float64) {
		if v := need(k); err == nil {
			if *dst, err = strconv.ParseFloat(v, 64); err != nil {
				err = fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	l.Model = need("model")
	atoi("params", &l.Params)
	atoi("ranks", &l.Ranks)
	atoi("batch_per_rank", &l.BatchPerRank)
	atoi("context", &l.Context)
	atoi("steps", &l.Steps)
	atof("tokens_per_s", &l.TokensPerSec)
	atof("ms_per_step", &l.MsPerStep)
	atof("loss", &l.Loss)
	if v := need("peak_rss_mib"); err == nil {
		for _, r := range strings.Split(v, ",") {
			m, perr := strconv.ParseFloat(r, 64)
			if perr != nil {
				return l, fmt.Errorf("peak_rss_mib: %w", perr)
			}
			l.PeakRSSMiB = append(l.PeakRSSMiB, m)
		}
		if len(l.PeakRSSMiB) != l.Ranks {
			return l, fmt.Errorf("peak_rss_mib has %d values for %d ranks", len(l.PeakRSSMiB), l.Ranks)
		}
	}
	return l, err
}

// gptCPUReport is what `symbench gpt-cpu` measured.
type gptCPUReport struct {
	Date, Host   string
	Model        string // train's --model, the peer's --model
	Context      int    // tokens per sequence
	Params       int    // from train's header line
	Engine       string // train's comm backend and compute engine
	PerPE        int
	Warmup       int
	Steps        int
	Reps         int
	CPUs         int
	StartLoad    float64 // 1-minute load average before the first run: the host's own quiet
	Torch        bool    // PyTorch was measured
	TorchVersion string  // from the script's header
	TorchParams  int
	Rows         []gptCPURow
	Commands     []string
}

// gptCPURow is one PE count: the runs of both sides.
type gptCPURow struct {
	PEs        int
	Ours       []gptTrainRun
	Torch      []torchGPTLine
	TorchOther []float64 // CPUs other processes kept busy during each PyTorch run
}

// oursTokens is the median tokens/s of train's runs.
func (r gptCPURow) oursTokens() float64 {
	var v []float64
	for _, run := range r.Ours {
		v = append(v, run.TokensPerSec)
	}
	return median(v)
}

// torchTokens is the median tokens/s of PyTorch's runs (0: not measured).
func (r gptCPURow) torchTokens() float64 {
	var v []float64
	for _, t := range r.Torch {
		v = append(v, t.TokensPerSec)
	}
	return median(v)
}

// oursMemory is the largest VmHWM and PSS of any PE in any run.
func (r gptCPURow) oursMemory() (hwm, pss int64) {
	for _, run := range r.Ours {
		for _, m := range run.Run.Memory {
			hwm, pss = max(hwm, m.HWM), max(pss, m.PSS)
		}
	}
	return hwm, pss
}

// paramsCell is the parameter counts of train's and PyTorch's runs (they
// are equal: symbench stops when they are not), "-" where a side did not run.
func (r gptCPURow) paramsCell() string {
	ours, theirs := "-", "-"
	if len(r.Ours) > 0 {
		ours = strconv.Itoa(r.Ours[0].Run.Params)
	}
	if len(r.Torch) > 0 {
		theirs = strconv.Itoa(r.Torch[0].Params)
	}
	return ours + " / " + theirs
}

// torchPeakRSS is the largest peak RSS of any rank in any run, in bytes.
func (r gptCPURow) torchPeakRSS() int64 {
	var m float64
	for _, t := range r.Torch {
		for _, v := range t.PeakRSSMiB {
			m = max(m, v)
		}
	}
	return int64(m * (1 << 20))
}

// sharded says whether train sharded the optimizer state in every run.
func (r gptCPURow) sharded() bool {
	for _, run := range r.Ours {
		if !run.Sharded {
			return false
		}
	}
	return len(r.Ours) > 0
}

// arenaBytes is what a PE holds in its arenas: the parameters and the
// gradients in float32, and Adam's two moments, of which a PE keeps 1/pes
// when the update is sharded.
func arenaBytes(params, pes int, sharded bool) int64 {
	n := int64(params)
	moments := 2 * 4 * n
	if sharded {
		moments /= int64(pes)
	}
	return 2*4*n + moments
}

// gptCPUTargets are the speed targets: symddp's tokens/s over PyTorch's at
// a PE count.
var gptCPUTargets = []struct {
	pes   int
	ratio float64
}{{1, 1.5}, {2, 2}}

// gptCPUTable is the table's header and rows.
func gptCPUTable(rep gptCPUReport) ([]string, [][]string) {
	head := []string{"PEs", "global batch", "symddp tokens/s", "PyTorch tokens/s", "symddp/PyTorch",
		"symddp VmHWM/PE", "symddp PSS/PE", "PyTorch peak RSS/PE", "arenas/PE", "params symddp / PyTorch"}
	var rows [][]string
	for _, r := range rep.Rows {
		ours, theirs := r.oursTokens(), r.torchTokens()
		hwm, pss := r.oursMemory()
		row := []string{strconv.Itoa(r.PEs), strconv.Itoa(r.PEs * rep.PerPE), tokensCell(ours), tokensCell(theirs), "-",
			mib(hwm), mib(pss), mib(r.torchPeakRSS()), "-", r.paramsCell()}
		if ours > 0 && theirs > 0 {
			row[4] = fmt.Sprintf("%.2f×", ours/theirs)
		}
		if rep.Params > 0 {
			how := "replicated"
			if r.sharded() {
				how = "sharded"
			}
			row[8] = fmt.Sprintf("%s (%s)", mib(arenaBytes(rep.Params, r.PEs, r.sharded())), how)
		}
		rows = append(rows, row)
	}
	return head, rows
}

func tokensCell(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// quietLoad is the most load (the 1-minute average before the runs, and
// the CPUs other processes kept busy during them) under which a comparison
// on a small host means something: above it the verdicts are withheld.
const quietLoad = 0.3

// gptCPUVerdicts says whether each target was met, or why no verdict is
// given: a host that was not quiet.
func gptCPUVerdicts(rep gptCPUReport) []string {
	other, torchOther := rep.otherCores()
	if rep.StartLoad > quietLoad || median(other) > quietLoad || median(torchOther) > quietLoad {
		return []string{fmt.Sprintf("no verdicts: the host was not quiet (load average %.2f before the first run, other processes %.2f CPUs during train's runs and %.2f during PyTorch's; all must be at most %.1f): run again when nothing else runs",
			rep.StartLoad, median(other), median(torchOther), quietLoad)}
	}
	var out []string
	for _, t := range gptCPUTargets {
		line := fmt.Sprintf("target symddp >= %gx PyTorch at %d PE", t.ratio, t.pes)
		if t.pes > 1 {
			line += "s"
		}
		var row *gptCPURow
		for i := range rep.Rows {
			if rep.Rows[i].PEs == t.pes {
				row = &rep.Rows[i]
			}
		}
		switch {
		case row == nil:
			line += ": not measured (no such --pes)"
		case row.oursTokens() <= 0 || row.torchTokens() <= 0:
			line += ": not measured (PyTorch did not run)"
		default:
			r := row.oursTokens() / row.torchTokens()
			line += fmt.Sprintf(": %.2fx: %s", r, metOrNot(r >= t.ratio))
		}
		out = append(out, line)
	}
	return out
}

// printGPTCPUReport writes the header, the table, the targets' verdicts, one
// RESULT line per PE count for scripts, and the commands that ran.
func printGPTCPUReport(w io.Writer, format string, rep gptCPUReport) error {
	fmt.Fprintf(w, "gpt-cpu: %s (%d parameters), %s; %d sequences of %d tokens per PE and step; %d warm-up steps, then %d timed; %d run(s) of each\n",
		rep.Model, rep.Params, rep.Engine, rep.PerPE, rep.Context, rep.Warmup, rep.Steps, rep.Reps)
	fmt.Fprintf(w, "symddp: train, AdamW without clipping, 1 BLAS thread per PE, Go source text; tokens/s from its metrics log over the timed steps\n")
	if rep.Torch {
		fmt.Fprintf(w, "PyTorch %s: DistributedDataParallel over gloo, 1 thread per rank, random tokens (%s, %d parameters)\n", rep.TorchVersion, rep.Model, rep.TorchParams)
	} else {
		fmt.Fprintln(w, "PyTorch: not measured (--torch-script none)")
	}
	fmt.Fprintf(w, "host: %s\ndate: %s\n", rep.Host, rep.Date)
	fmt.Fprintf(w, "load: 1-minute load average %.2f before the first run\n", rep.StartLoad)
	fmt.Fprintln(w, gptLoadLine(rep))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "tokens/s (medians) and memory per PE (the worst PE; arenas: parameters + gradients + Adam's two moments, in float32, the moments 1/PEs each when sharded):")
	head, rows := gptCPUTable(rep)
	if err := writeTable(w, format, 2, head, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, l := range gptCPUVerdicts(rep) {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "RESULT gpt-cpu model=%s pes=%d batch_per_pe=%d symddp_tokens_per_s=%.1f torch_tokens_per_s=%.1f\n",
			rep.Model, r.PEs, rep.PerPE, r.oursTokens(), r.torchTokens())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range rep.Commands {
		fmt.Fprintf(w, "  %s\n", c)
	}
	return nil
}

// otherCores are the CPUs other processes kept busy during each of train's
// runs and during each of PyTorch's.
func (rep gptCPUReport) otherCores() (train, torch []float64) {
	for _, r := range rep.Rows {
		for _, run := range r.Ours {
			train = append(train, run.Run.OtherCores)
		}
		torch = append(torch, r.TorchOther...)
	}
	return train, torch
}

// gptLoadLine says how busy the host was with other work during the runs
// of both sides.
func gptLoadLine(rep gptCPUReport) string {
	var loads []float64
	for _, r := range rep.Rows {
		for _, run := range r.Ours {
			loads = append(loads, run.Run.Load)
		}
	}
	if len(loads) == 0 {
		return "load: no runs"
	}
	lo, hi := loads[0], loads[0]
	for _, l := range loads {
		lo, hi = min(lo, l), max(hi, l)
	}
	other, torchOther := rep.otherCores()
	line := fmt.Sprintf("load: 1-minute load average %.1f–%.1f at the starts of train's runs; other processes kept %.2f of %d CPUs busy during them (median)",
		lo, hi, median(other), rep.CPUs)
	if len(torchOther) > 0 {
		line += fmt.Sprintf(", %.2f during PyTorch's", median(torchOther))
	}
	return line
}
