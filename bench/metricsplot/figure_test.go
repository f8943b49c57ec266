package metricsplot

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/symddp/symddp/bench/plotspec"
)

// panelTitles is the figure's panels as "title [y label]".
func panelTitles(f plotspec.Figure) []string {
	var s []string
	for _, p := range f.Panels {
		s = append(s, p.Title+" ["+p.YLabel+"]")
	}
	return s
}

// TestFigureLanguageModels: two language-model runs give four panels in
// two rows, a line per run in each, the points those of the logs.
func TestFigureLanguageModels(t *testing.T) {
	a, b := readLog(t, "a.jsonl", lmLog), readLog(t, "b.jsonl", resumedLog)
	f, err := Figure([]Run{a, b}, []string{"lr 1e-3", "resumed"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"training loss [loss]", "validation loss [loss]", "learning rate [lr]", "throughput [tokens/s]"}
	if got := panelTitles(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("panels %q, want %q", got, want)
	}
	if f.Width != 12 || f.Height != 8 || f.DPI != 96 || f.Columns != 2 {
		t.Errorf("figure %gx%g in at %d dpi in %d columns, want 12x8 at 96 in 2", f.Width, f.Height, f.DPI, f.Columns)
	}
	for _, p := range f.Panels {
		if p.XLabel != "step" || !p.LegendAbove || len(p.Lines) != 2 || p.Lines[0].Name != "lr 1e-3" || p.Lines[1].Name != "resumed" ||
			p.Lines[0].Color != 0 || p.Lines[1].Color != 1 || p.Lines[0].NoGlyphs {
			t.Errorf("panel %q: x label %q, lines %+v", p.Title, p.XLabel, p.Lines)
		}
	}
	if got := f.Panels[1].Lines[1].Points; !reflect.DeepEqual(got, pts(20, 3.625, 40, 3.1875, 50, 3)) {
		t.Errorf("validation loss of the resumed run: %v", got)
	}
	if got := f.Panels[3].Lines[0].Points; !reflect.DeepEqual(got, pts(10, 10240, 20, 11520, 30, 10880)) {
		t.Errorf("tokens/s of run a: %v", got)
	}
	if !f.Panels[2].YFrom0 || !f.Panels[3].YFrom0 || f.Panels[0].YFrom0 {
		t.Errorf("y from 0: lr %v, throughput %v, loss %v; want true, true, false", f.Panels[2].YFrom0, f.Panels[3].YFrom0, f.Panels[0].YFrom0)
	}
}

// TestFigureClassifier: a classifier's run adds test accuracy in percent,
// its throughput is samples/s, and five panels take three columns.
func TestFigureClassifier(t *testing.T) {
	f, err := Figure([]Run{readLog(t, "mlp.jsonl", classifierLog)}, []string{"mlp"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"training loss [loss]", "test loss [loss]", "test accuracy [accuracy (%)]", "learning rate [lr]", "throughput [samples/s]"}
	if got := panelTitles(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("panels %q, want %q", got, want)
	}
	if f.Width != 18 || f.Height != 8 || f.Columns != 3 {
		t.Errorf("figure %gx%g in, %d columns; want 18x8 in 3", f.Width, f.Height, f.Columns)
	}
	if got := f.Panels[2].Lines[0].Points; !reflect.DeepEqual(got, pts(40, 81.25, 80, 87.5)) {
		t.Errorf("test accuracy: %v", got)
	}
	if got := f.Panels[4].Lines[0].Points; !reflect.DeepEqual(got, pts(20, 28000, 40, 44000, 80, 45000)) {
		t.Errorf("samples/s: %v", got)
	}
}

// TestFigureMixed: a language model beside a classifier is compared in
// samples/s, which both log; panels the language model lacks have the
// classifier's line only, in the classifier's colour.
func TestFigureMixed(t *testing.T) {
	f, err := Figure([]Run{readLog(t, "lm.jsonl", lmLog), readLog(t, "mlp.jsonl", classifierLog)}, []string{"gpt", "mlp"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"training loss [loss]", "validation or test loss [loss]", "test accuracy [accuracy (%)]", "learning rate [lr]", "throughput [samples/s]"}
	if got := panelTitles(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("panels %q, want %q", got, want)
	}
	if l := f.Panels[2].Lines; len(l) != 1 || l[0].Name != "mlp" || l[0].Color != 1 {
		t.Errorf("test accuracy lines %+v, want mlp's alone in colour 1", l)
	}
	if got := f.Panels[4].Lines[0].Points; !reflect.DeepEqual(got, pts(10, 80, 20, 90, 30, 85)) {
		t.Errorf("samples/s of the language model: %v", got)
	}
	if got := f.Panels[1].Lines[1].Points; !reflect.DeepEqual(got, pts(40, 0.5625, 80, 0.4375)) {
		t.Errorf("test loss of the classifier: %v", got)
	}
}

// TestFigureLeavesOut: panels no run has points for are left out; a long
// line is drawn without glyphs.
func TestFigureLeavesOut(t *testing.T) {
	var long strings.Builder
	for s := 1; s <= glyphsUpTo+1; s++ {
		fmt.Fprintf(&long, "{\"step\":%d,\"val_loss\":3}\n", 10*s)
	}
	f, err := Figure([]Run{readLog(t, "eval.jsonl", long.String())}, []string{"eval only"})
	if err != nil {
		t.Fatal(err)
	}
	if got := panelTitles(f); !reflect.DeepEqual(got, []string{"validation loss [loss]"}) {
		t.Fatalf("panels %q, want the validation loss alone", got)
	}
	if rows, cols := f.Grid(); rows != 1 || cols != 1 || f.Width != 6 || f.Height != 4 {
		t.Errorf("grid %dx%d of %gx%g in, want 1x1 of 6x4", rows, cols, f.Width, f.Height)
	}
	if l := f.Panels[0].Lines[0]; len(l.Points) != glyphsUpTo+1 || !l.NoGlyphs {
		t.Errorf("%d points, no glyphs %v; want %d without", len(l.Points), l.NoGlyphs, glyphsUpTo+1)
	}
}

func TestFigureErrors(t *testing.T) {
	r := readLog(t, "a.jsonl", lmLog)
	if _, err := Figure([]Run{r, r}, []string{"one"}); err == nil || err.Error() != "1 labels for 2 runs" {
		t.Errorf("labels short: error %v", err)
	}
	if _, err := Figure(nil, nil); err == nil {
		t.Error("no runs: no error")
	}
}

func TestLabels(t *testing.T) {
	runs := []Run{{Path: "/tmp/a.jsonl"}, {Path: "runs/b.jsonl"}}
	if got := Labels(runs); !reflect.DeepEqual(got, []string{"a.jsonl", "b.jsonl"}) {
		t.Errorf("labels %q", got)
	}
	runs[1].Path = "old/a.jsonl"
	if got := Labels(runs); !reflect.DeepEqual(got, []string{"/tmp/a.jsonl", "old/a.jsonl"}) {
		t.Errorf("labels of two a.jsonl %q, want their paths", got)
	}
}
