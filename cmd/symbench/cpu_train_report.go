package main

import (
	"fmt"
	"io"
	"slices"
)

// printTrainReport writes the tables of `symbench train` and the verdicts
// on issue 11's targets: once over all runs, once over the quiet runs only
// (those during which other processes kept at most rep.Quiet CPUs busy).
func printTrainReport(w io.Writer, format string, rep cpuTrainReport) error {
	batch := fmt.Sprintf("global batch %d", rep.Batch)
	if rep.PerPE > 0 {
		batch = fmt.Sprintf("batch %d per PE (global: PEs x %d, weak scaling)", rep.PerPE, rep.PerPE)
	}
	fmt.Fprintf(w, "train: mlp (%d parameters), %s, %s, %s; %d warm-up steps, then %d timed steps; %d runs of each\n",
		rep.Params, rep.Engine, batch, rep.Dataset, rep.Warmup, rep.Steps, rep.Reps)
	fmt.Fprintf(w, "host: %s\ndate: %s\n", rep.Host, rep.Date)
	if rep.Note != "" {
		fmt.Fprintf(w, "note: %s\n", rep.Note)
	}
	fmt.Fprintln(w, loadLine(rep))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "All runs (medians):")
	fmt.Fprintln(w)
	printTrainTables(w, format, rep)
	quiet := rep.quietRuns()
	if len(quiet.Results) == 0 {
		fmt.Fprintf(w, "No quiet runs (other processes at most %.2f CPUs busy).\n", rep.Quiet)
		return nil
	}
	fmt.Fprintf(w, "Quiet runs only: those during which other processes kept at most %.2f CPUs busy (medians; runs counted in n):\n\n", rep.Quiet)
	printTrainTables(w, format, quiet)
	return nil
}

// quietRuns is rep with only the runs during which other processes kept at
// most rep.Quiet CPUs busy; jobs without such a run are left out.
func (rep cpuTrainReport) quietRuns() cpuTrainReport {
	q := rep
	q.Results = nil
	for _, r := range rep.Results {
		var runs []cpuTrainRun
		for _, run := range r.Runs {
			if run.OtherCores <= rep.Quiet {
				runs = append(runs, run)
			}
		}
		if len(runs) > 0 {
			q.Results = append(q.Results, cpuTrainResult{Job: r.Job, Runs: runs})
		}
	}
	return q
}

// printTrainTables writes the scaling and memory table, the overlap table
// and the verdicts of the runs in rep.
func printTrainTables(w io.Writer, format string, rep cpuTrainReport) {
	base1, baseN := rep.find(cpuTrainJob{PEs: 1, Threads: 1}), rep.find(cpuTrainJob{PEs: 1, Threads: rep.CPUs})
	head := []string{"PEs", "BLAS threads/PE", "n", "samples/s", "range", "step", "vs 1 PE, 1 thread",
		fmt.Sprintf("vs 1 PE, %d threads", rep.CPUs), "VmHWM/PE", "PSS/PE", "anon/PE"}
	var rows [][]string
	for _, r := range rep.scalingRows() {
		sps, step := r.median()
		lo, hi := r.spread()
		m := r.memory()
		threads := r.Job.Threads
		if threads == 0 {
			threads = max(1, rep.CPUs/r.Job.PEs)
		}
		rows = append(rows, []string{fmt.Sprint(r.Job.PEs), fmt.Sprint(threads), fmt.Sprint(len(r.Runs)), fmt.Sprintf("%.0f", sps),
			fmt.Sprintf("%.0f–%.0f", lo, hi), formatTime(step), ratioCell(sps, base1), ratioCell(sps, baseN),
			mib(m.HWM), mib(m.PSS), mib(m.Anon)})
	}
	fmt.Fprintln(w, "samples/s and memory per PE (the worst PE; PSS divides shared pages among the processes mapping them):")
	writeTable(w, format, 2, head, rows)
	fmt.Fprintln(w)

	if buckets := rep.bucketSizes(); len(buckets) > 1 {
		head = []string{"PEs"}
		for _, b := range buckets {
			head = append(head, "step, "+bucketName(b))
		}
		for _, b := range buckets[1:] {
			head = append(head, bucketName(b)+" vs "+bucketName(buckets[0]))
		}
		rows = nil
		for _, p := range rep.peCounts() {
			if p == 1 {
				continue
			}
			row := []string{fmt.Sprint(p)}
			steps := make([]float64, len(buckets))
			for i, b := range buckets {
				if r := rep.find(cpuTrainJob{PEs: p, Bucket: b}); r != nil {
					_, steps[i] = r.median()
					row = append(row, fmt.Sprintf("%s (n=%d)", formatTime(steps[i]), len(r.Runs)))
				} else {
					row = append(row, "-")
				}
			}
			for i := range buckets[1:] {
				if steps[0] > 0 && steps[i+1] > 0 {
					row = append(row, fmt.Sprintf("%+.1f%%", 100*(steps[0]/steps[i+1]-1)))
				} else {
					row = append(row, "-")
				}
			}
			rows = append(rows, row)
		}
		fmt.Fprintln(w, "step time by update: sharded (train's default: reduce-scatter, each PE updates its shard, all-gather) or replicated (allreduce, every PE updates everything) with a gradient bucket size (0: one allreduce after backward; otherwise buckets start during backward); + is faster:")
		writeTable(w, format, 2, head, rows)
		fmt.Fprintln(w)
	}
	for _, line := range rep.verdicts() {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
}

// find returns the result of job j, or nil.
func (rep cpuTrainReport) find(j cpuTrainJob) *cpuTrainResult {
	for i := range rep.Results {
		if rep.Results[i].Job == j {
			return &rep.Results[i]
		}
	}
	return nil
}

// scalingRows are the one-PE jobs and, for every larger PE count, the job
// with train's default bucket size (else the first measured).
func (rep cpuTrainReport) scalingRows() []cpuTrainResult {
	var out []cpuTrainResult
	for _, p := range rep.peCounts() {
		var def *cpuTrainResult
		for i, r := range rep.Results {
			switch {
			case r.Job.PEs != p:
			case p == 1:
				out = append(out, r)
			case r.Job.Bucket == "":
				def = &rep.Results[i]
			case def == nil:
				def = &rep.Results[i]
			}
		}
		if def != nil {
			out = append(out, *def)
		}
	}
	return out
}

// peCounts are the measured PE counts in order.
func (rep cpuTrainReport) peCounts() []int {
	var out []int
	for _, r := range rep.Results {
		if len(out) == 0 || out[len(out)-1] != r.Job.PEs {
			out = append(out, r.Job.PEs)
		}
	}
	return out
}

// bucketSizes are the bucket sizes measured above one PE, in order.
func (rep cpuTrainReport) bucketSizes() []string {
	var out []string
	for _, r := range rep.Results {
		if r.Job.PEs > 1 && !slices.Contains(out, r.Job.Bucket) {
			out = append(out, r.Job.Bucket)
		}
	}
	return out
}

// bucketName names an update mode: "sharded" (train's default) or
// "replicated, bucket SIZE".
func bucketName(b string) string {
	if b == "" {
		return "sharded"
	}
	return "replicated, bucket " + b
}

// spread is the lowest and highest samples/s of the runs.
func (r cpuTrainResult) spread() (lo, hi float64) {
	for i, run := range r.Runs {
		if i == 0 || run.SamplesPerSec < lo {
			lo = run.SamplesPerSec
		}
		hi = max(hi, run.SamplesPerSec)
	}
	return lo, hi
}

// verdicts says whether issue 11's CPU targets were met.
func (rep cpuTrainReport) verdicts() []string {
	var out []string
	base1 := rep.find(cpuTrainJob{PEs: 1, Threads: 1})
	baseN := rep.find(cpuTrainJob{PEs: 1, Threads: rep.CPUs})
	for _, r := range rep.scalingRows() {
		if r.Job.PEs != 2 || base1 == nil {
			continue
		}
		s2, _ := r.median()
		s1, _ := base1.median()
		_, b2 := r.spread()
		_, b1 := base1.spread()
		verdict := metOrNot(s2/s1 >= 1.7)
		if rep.StartLoad > quietLoad {
			verdict = fmt.Sprintf("no verdict (load average %.2f before the first run, above %.1f: run again when nothing else runs)", rep.StartLoad, quietLoad)
		}
		line := fmt.Sprintf("target --pes 2 >= 1.7x --pes 1 (1 BLAS thread, the same compute per PE): %.2fx: %s (fastest runs of each: %.2fx)",
			s2/s1, verdict, b2/b1)
		if baseN != nil {
			sN, _ := baseN.median()
			line += fmt.Sprintf("; against --pes 1 with %d threads (train's default): %.2fx", rep.CPUs, s2/sN)
		}
		out = append(out, line)
	}
	if rep.TargetB > 0 {
		out = append(out, fmt.Sprintf("target memory per PE <= params + grads + momentum + one batch + 64 MiB = %s:", mib(rep.TargetB)))
		for _, r := range rep.scalingRows() {
			m := r.memory()
			out = append(out, fmt.Sprintf("  --pes %s: PSS %s %s, VmHWM %s %s, anonymous %s",
				r.Job.label(), mib(m.PSS), metOrNot(m.PSS <= rep.TargetB), mib(m.HWM), metOrNot(m.HWM <= rep.TargetB), mib(m.Anon)))
		}
	}
	return out
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// loadLine says how busy the host was with other work during the runs.
func loadLine(rep cpuTrainReport) string {
	var loads, other []float64
	for _, r := range rep.Results {
		for _, run := range r.Runs {
			loads, other = append(loads, run.Load), append(other, run.OtherCores)
		}
	}
	if len(loads) == 0 {
		return "load: no runs"
	}
	lo, hi := loads[0], loads[0]
	for _, l := range loads {
		lo, hi = min(lo, l), max(hi, l)
	}
	omax := 0.0
	for _, c := range other {
		omax = max(omax, c)
	}
	return fmt.Sprintf("load: 1-minute load average %.2f before the first run, %.1f–%.1f at the starts of the runs; other processes kept %.2f of %d CPUs busy (median over runs, max %.2f)",
		rep.StartLoad, lo, hi, median(other), rep.CPUs, omax)
}

func ratioCell(sps float64, base *cpuTrainResult) string {
	if base == nil {
		return "-"
	}
	b, _ := base.median()
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", sps/b)
}

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
