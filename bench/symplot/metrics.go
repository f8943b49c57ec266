package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/symddp/symddp/bench/metricsplot"
)

const metricsUsage = `usage: symplot metrics -out runs.png [-label NAME]... a.jsonl [b.jsonl ...]

Draws the metrics logs of training runs (train --metrics FILE) against step,
one line per log, in panels: training loss, validation loss (language
models) or test loss (classifiers), test accuracy (classifiers), learning
rate, and throughput (tokens/s when every run is a language model's,
samples/s otherwise). A panel no log has data for is left out.

A resumed run's log may repeat steps: what was logged later wins (a
training record at or before the last one's step marks a restart and drops
what the log held from that step on). A line cut short by a crash is skipped
with a note; a log with nothing to draw is an error.

Flags go before the logs:
`

// labelList is the repeated -label flag.
type labelList []string

func (l *labelList) String() string { return strings.Join(*l, ", ") }

func (l *labelList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// runMetrics is `symplot metrics args`; it returns the exit status.
func runMetrics(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("symplot metrics", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, metricsUsage)
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "`PNG` to write (required)")
	var labels labelList
	fs.Var(&labels, "label", "legend `name` of the next log, once per log in order (default: the logs' file names)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	logs := fs.Args()
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "symplot metrics: "+format+"; see symplot metrics -h\n", a...)
		return 2
	}
	switch {
	case *out == "":
		return bad("-out PNG is required")
	case len(logs) == 0:
		return bad("no metrics logs to draw")
	case len(labels) > 0 && len(labels) != len(logs):
		return bad("%d -label for %d logs: give one per log or none", len(labels), len(logs))
	}
	for _, l := range logs {
		if strings.HasPrefix(l, "-") {
			return bad("flag %s after the logs: flags go before them", l)
		}
	}
	runs := make([]metricsplot.Run, len(logs))
	for i, path := range logs {
		r, err := metricsplot.Read(path)
		if err != nil {
			fmt.Fprintf(stderr, "symplot: %v\n", err)
			return 1
		}
		if len(r.Skipped) > 0 {
			fmt.Fprintf(stderr, "symplot: %s: skipped %s (not a JSON record: cut short by a crash?)\n", path, lineList(r.Skipped))
		}
		runs[i] = r
	}
	if len(labels) == 0 {
		labels = metricsplot.Labels(runs)
	}
	f, err := metricsplot.Figure(runs, labels)
	if err == nil {
		err = writePNG(*out, f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "symplot: %v\n", err)
		return 1
	}
	return 0
}

// lineList is "line 7", "lines 3, 9", or the first few and a count.
func lineList(lines []int) string {
	const shown = 5
	s := make([]string, 0, shown)
	for _, n := range lines[:min(len(lines), shown)] {
		s = append(s, fmt.Sprint(n))
	}
	list := strings.Join(s, ", ")
	if len(lines) > shown {
		list += fmt.Sprintf(" and %d more", len(lines)-shown)
	}
	if len(lines) == 1 {
		return "line " + list
	}
	return "lines " + list
}
