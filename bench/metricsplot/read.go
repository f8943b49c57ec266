// Package metricsplot reads the metrics logs that `train --metrics` writes
// (JSON lines) and describes them as a plotspec.Figure, one line per run,
// which bench/symplot draws: runs compared by eye.
//
// It lives in the main module beside plotspec and without dependencies, so
// the reading of the logs is tested with symddp while the drawing stays in
// symplot's module.
package metricsplot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/symddp/symddp/bench/plotspec"
)

// Metric names a series of a run: the JSON field it comes from.
type Metric string

// The series a metrics log holds, against step.
const (
	Loss          Metric = "loss"            // training loss, averaged over the log window
	LR            Metric = "lr"              // learning rate
	SamplesPerSec Metric = "samples_per_sec" // training throughput
	TokensPerSec  Metric = "tokens_per_sec"  // training throughput of a language model
	ValLoss       Metric = "val_loss"        // a language model's validation loss
	TestLoss      Metric = "test_loss"       // a classifier's test loss
	TestAccuracy  Metric = "test_accuracy"   // a classifier's test accuracy, 0 to 1
)

// Run is one metrics log: each series' points (X the step), in
// increasing step order.
type Run struct {
	Path   string
	Series map[Metric][]plotspec.Point
	// Skipped are the line numbers (from 1) of lines that are not a JSON
	// object: cut short by a crash, or damaged.
	Skipped []int
}

// LanguageModel reports whether the run logged tokens/s or a validation
// loss, as `train` does for language models only.
func (r Run) LanguageModel() bool {
	return len(r.Series[TokensPerSec]) > 0 || len(r.Series[ValLoss]) > 0
}

// record is the part of a metrics line that is drawn; other fields are
// ignored.
type record struct {
	Step          *int     `json:"step"`
	Final         *bool    `json:"final"` // the run's summary
	Loss          *float64 `json:"loss"`  // present in training records only
	LR            *float64 `json:"lr"`
	SamplesPerSec *float64 `json:"samples_per_sec"`
	TokensPerSec  *float64 `json:"tokens_per_sec"`
	ValLoss       *float64 `json:"val_loss"`
	TestLoss      *float64 `json:"test_loss"`
	TestAccuracy  *float64 `json:"test_accuracy"`
}

// Read reads the metrics log at path.
//
// Three kinds of record are drawn: training records (with "loss": loss,
// lr, samples/s and, when not 0, tokens/s), evaluation records (val_loss,
// or test_loss and test_accuracy) and the summary ("final"), of which only
// the evaluation at the end of the run is drawn, its throughput being an
// average over the run rather than a point. A record without a step, and
// fields other than these, are ignored; a line that is not a JSON object
// is skipped and its number kept in Run.Skipped.
//
// A restarted run appends to its log, so steps may come again. What was
// logged later wins: a training record at step s that is not past the last
// training record marks a restart there and drops every series' points at
// s and after; an evaluation at a step not past its series' last drops
// that series' points from its step on.
//
// A log with no point to draw is an error naming the file.
func Read(path string) (Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the message names the file already
		}
		return Run{}, fmt.Errorf("read %s: %w", path, err)
	}
	r := Run{Path: path, Series: map[Metric][]plotspec.Point{}}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var rec record
		if json.Unmarshal(line, &rec) != nil {
			r.Skipped = append(r.Skipped, i+1)
			continue
		}
		r.add(rec)
	}
	for _, s := range r.Series {
		if len(s) > 0 {
			return r, nil
		}
	}
	what := "no training or evaluation record"
	if len(r.Skipped) > 0 {
		what += fmt.Sprintf(" (%d lines are not JSON records)", len(r.Skipped))
	}
	return Run{}, fmt.Errorf("%s: %s: not a train --metrics log?", path, what)
}

// add puts the drawn fields of rec into the run's series.
func (r *Run) add(rec record) {
	if rec.Step == nil {
		return
	}
	step := float64(*rec.Step)
	put := func(m Metric, v *float64) {
		if v == nil {
			return
		}
		s := r.Series[m]
		if n := len(s); n > 0 && s[n-1].X >= step {
			s = before(s, step)
		}
		r.Series[m] = append(s, plotspec.Point{X: step, Y: *v})
	}
	switch {
	case rec.Final != nil:
		// the summary: only its evaluation is a point of a curve
	case rec.Loss != nil:
		if s := r.Series[Loss]; len(s) > 0 && s[len(s)-1].X >= step {
			for m := range r.Series {
				r.Series[m] = before(r.Series[m], step) // a restart: what came after is stale
			}
		}
		put(Loss, rec.Loss)
		put(LR, rec.LR)
		put(SamplesPerSec, rec.SamplesPerSec)
		if rec.TokensPerSec != nil && *rec.TokensPerSec > 0 {
			put(TokensPerSec, rec.TokensPerSec)
		}
		return
	}
	put(ValLoss, rec.ValLoss)
	put(TestLoss, rec.TestLoss)
	put(TestAccuracy, rec.TestAccuracy)
}

// before is s without its points at step and after.
func before(s []plotspec.Point, step float64) []plotspec.Point {
	for i, p := range s {
		if p.X >= step {
			return s[:i]
		}
	}
	return s
}
