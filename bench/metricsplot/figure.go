package metricsplot

import (
	"fmt"
	"path/filepath"

	"github.com/symddp/symddp/bench/plotspec"
)

// Figure size: panels of panelWidth x panelHeight inches at dpi.
const (
	panelWidth  = 6.0
	panelHeight = 4.0
	dpi         = 96
)

// glyphsUpTo is the most points a line is drawn with a glyph at each;
// longer lines are drawn plain, or the glyphs would hide the line.
const glyphsUpTo = 30

// panelSpec is one panel of the figure and the series it draws: the first
// of metrics that a run has.
type panelSpec struct {
	title, yLabel string
	metrics       []Metric
	scale         float64 // y = value * scale
	from0         bool
}

// Figure describes runs as panels against step: training loss, validation
// (or test) loss, test accuracy, learning rate and throughput (tokens/s
// when every run is a language model's, samples/s otherwise), one line per
// run named by labels[i], the legend above the lines. A panel no run has a
// point for is left out.
// Each run keeps its colour in every panel.
func Figure(runs []Run, labels []string) (plotspec.Figure, error) {
	if len(runs) == 0 {
		return plotspec.Figure{}, fmt.Errorf("no runs to draw")
	}
	if len(labels) != len(runs) {
		return plotspec.Figure{}, fmt.Errorf("%d labels for %d runs", len(labels), len(runs))
	}
	var panels []plotspec.Panel
	for _, ps := range panelSpecs(runs) {
		p := plotspec.Panel{Title: ps.title, XLabel: "step", YLabel: ps.yLabel, YFrom0: ps.from0, LegendAbove: true}
		for i, r := range runs {
			pts := firstSeries(r, ps.metrics)
			if len(pts) == 0 {
				continue
			}
			l := plotspec.Line{Name: labels[i], Color: i, NoGlyphs: len(pts) > glyphsUpTo, Points: make([]plotspec.Point, len(pts))}
			for j, pt := range pts {
				l.Points[j] = plotspec.Point{X: pt.X, Y: pt.Y * ps.scale}
			}
			p.Lines = append(p.Lines, l)
		}
		if len(p.Lines) > 0 {
			panels = append(panels, p)
		}
	}
	f := plotspec.Figure{DPI: dpi, Columns: 2, Panels: panels}
	if len(panels) > 4 {
		f.Columns = 3
	}
	rows, cols := f.Grid()
	f.Width, f.Height = panelWidth*float64(cols), panelHeight*float64(rows)
	return f, f.Check()
}

// panelSpecs are the panels for runs, in the figure's order.
func panelSpecs(runs []Run) []panelSpec {
	lm, cl := 0, 0 // language models and classifiers
	for _, r := range runs {
		if r.LanguageModel() {
			lm++
		} else {
			cl++
		}
	}
	eval := "validation loss"
	switch {
	case lm > 0 && cl > 0:
		eval = "validation or test loss"
	case cl > 0:
		eval = "test loss"
	}
	speed := panelSpec{title: "throughput", yLabel: "samples/s", metrics: []Metric{SamplesPerSec}, scale: 1, from0: true}
	if cl == 0 {
		speed.yLabel, speed.metrics = "tokens/s", []Metric{TokensPerSec}
	}
	return []panelSpec{
		{title: "training loss", yLabel: "loss", metrics: []Metric{Loss}, scale: 1},
		{title: eval, yLabel: "loss", metrics: []Metric{ValLoss, TestLoss}, scale: 1},
		{title: "test accuracy", yLabel: "accuracy (%)", metrics: []Metric{TestAccuracy}, scale: 100},
		{title: "learning rate", yLabel: "lr", metrics: []Metric{LR}, scale: 1, from0: true},
		speed,
	}
}

// firstSeries is the first of metrics that r has points for.
func firstSeries(r Run, metrics []Metric) []plotspec.Point {
	for _, m := range metrics {
		if s := r.Series[m]; len(s) > 0 {
			return s
		}
	}
	return nil
}

// Labels names runs by their files' base names, or by their paths as
// given when two base names are the same.
func Labels(runs []Run) []string {
	labels := make([]string, len(runs))
	seen := map[string]bool{}
	unique := true
	for i, r := range runs {
		labels[i] = filepath.Base(r.Path)
		if seen[labels[i]] {
			unique = false
		}
		seen[labels[i]] = true
	}
	if !unique {
		for i, r := range runs {
			labels[i] = r.Path
		}
	}
	return labels
}
