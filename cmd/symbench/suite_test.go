package main

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/symddp/symddp/bench/plotspec"
)

// allReduceRows are rows as `symbench allreduce` measures them, with Open
// MPI missing in one.
func allReduceRows() []row {
	mpi := func(s float64) *result { return &result{seconds: s} }
	return []row{
		{npes: 2, bytes: 4 << 10, shm: result{bytes: 4 << 10, seconds: 0.8e-6}, mpi: mpi(3.2e-6)},
		{npes: 2, bytes: 64 << 20, shm: result{bytes: 64 << 20, seconds: 8.87e-3}},
		{npes: 8, bytes: 1 << 20, shm: result{bytes: 1 << 20, seconds: 512.6e-6}, mpi: mpi(1.29e-3)},
	}
}

// What `symbench allreduce --json` writes is what `symbench all` reads back
// for its figure: the same busbw as the table's, Open MPI 0 where it was not
// measured; a file without rows, or a row without a bandwidth, is refused.
func TestAllReduceJSONRoundTrip(t *testing.T) {
	rows := allReduceRows()
	b, err := json.Marshal(allReduceRowsJSON("test host", "", rows))
	if err != nil {
		t.Fatal(err)
	}
	var back allReduceJSON
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	pts, err := back.busbwPoints()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		want := busbwPoint{npes: r.npes, bytes: r.bytes, shm: busbw(r.bytes, r.npes, r.shm.seconds)}
		if r.mpi != nil {
			want.mpi = busbw(r.bytes, r.npes, r.mpi.seconds)
		}
		if pts[i] != want {
			t.Errorf("row %d: %+v, want %+v", i, pts[i], want)
		}
	}
	if pts[1].mpi != 0 || !strings.Contains(string(b), `"mpi_busbw_gbs"`) || strings.Count(string(b), `"mpi_seconds"`) != 2 {
		t.Errorf("Open MPI's fields: %s", b)
	}
	if _, err := (allReduceJSON{}).busbwPoints(); err == nil {
		t.Error("a file without rows was accepted")
	}
	back.Rows[0].ShmBusBW = 0
	if _, err := back.busbwPoints(); err == nil {
		t.Error("a row without a bandwidth was accepted")
	}
}

// TestCompareGPUResults: symddp's graph step (train: a new batch every
// step) is compared with PyTorch's fed step, which does the same work, not
// with its eager or graph step on one resident batch (there 1.50×, here
// 2.00×); without a fed column there is no ratio.
func TestCompareGPUResults(t *testing.T) {
	ours := "table...\nRESULT symddp model=784-256-256-10 batch=256 eager=100000 graph=300000\n" +
		"RESULT symddp model=784-1024-1024-1024-1024-10 batch=1024 eager=50000 graph=60000\n" +
		"RESULT symddp model=784-256-256-10 batch=4096 eager=900000 graph=1000000\n"
	theirs := "RESULT torch model=784-256-256-10 batch=256 eager=150000 graph=200000 fed=150000\n" +
		"RESULT torch model=784-256-256-10 batch=4096 eager=800000 graph=1100000\n"
	rows := compareGPUResults(ours, theirs)
	want := [][]string{
		{"784-256-256-10", "256", "100000", "300000", "150000", "200000", "150000", "2.00×"},
		{"784-1024-1024-1024-1024-10", "1024", "50000", "60000", "-", "-", "-", "-"},
		{"784-256-256-10", "4096", "900000", "1000000", "800000", "1100000", "-", "-"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("rows %q, want %q", rows, want)
	}
}

// TestSuiteFigure: the figure's lines hold the measurements: busbw by size
// for every N (Open MPI where measured), samples/s by PEs for every update
// mode from the one-thread baseline, the reference line and the marker of
// one PE on every CPU; panels without data say so.
func TestSuiteFigure(t *testing.T) {
	pts := []busbwPoint{{2, 4 << 10, 4.88, 1.27}, {2, 64 << 20, 7.56, 0}, {8, 1 << 20, 3.58, 1.42}}
	rep := fakeReport()
	f := suiteFigure(pts, &rep)
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if len(f.Panels) != 2 || f.Width != 13 || f.Height != 5 || f.DPI != 96 {
		t.Fatalf("figure %+v", f)
	}
	type line struct {
		name   string
		dashed bool
		points []plotspec.Point
	}
	lines := func(p plotspec.Panel) []line {
		var out []line
		for _, l := range p.Lines {
			out = append(out, line{l.Name, len(l.Dashes) > 0, l.Points})
		}
		return out
	}
	ar := f.Panels[0]
	want := []line{
		{"shm N=2", false, []plotspec.Point{{X: 4 << 10, Y: 4.88}, {X: 64 << 20, Y: 7.56}}},
		{"MPI N=2", true, []plotspec.Point{{X: 4 << 10, Y: 1.27}}},
		{"shm N=8", false, []plotspec.Point{{X: 1 << 20, Y: 3.58}}},
		{"MPI N=8", true, []plotspec.Point{{X: 1 << 20, Y: 1.42}}},
	}
	if got := lines(ar); !reflect.DeepEqual(got, want) || !ar.LogX || len(ar.XTicks) != 3 || ar.XTicks[2].Label != "64 MiB" {
		t.Errorf("allreduce panel %+v, lines %+v", ar, got)
	}
	tr := f.Panels[1]
	// Every job has quiet runs: their medians (the noisy baseline run left
	// out: 51000, not 50000).
	want = []line{
		{"sharded", false, []plotspec.Point{{X: 1, Y: 51000}, {X: 2, Y: 90000}}},
		{"replicated, bucket 0", false, []plotspec.Point{{X: 1, Y: 51000}, {X: 2, Y: 80000}}},
		{"1 PE, 1 thread x min(PEs, 2 CPUs)", true, []plotspec.Point{{X: 1, Y: 51000}, {X: 2, Y: 102000}}},
	}
	if got := lines(tr); !reflect.DeepEqual(got, want) || !strings.HasSuffix(tr.Title, "(median of the runs with other processes <= 0.25 CPUs)") || !tr.YFrom0 {
		t.Errorf("training panel %+v, lines %+v", tr, got)
	}
	if len(tr.Markers) != 1 || tr.Markers[0].At != (plotspec.Point{X: 1, Y: 60000}) || tr.Lines[2].Color != plotspec.Grey {
		t.Errorf("training panel markers %+v", tr.Markers)
	}
	empty := suiteFigure(nil, nil)
	if err := empty.Check(); err != nil || !strings.HasSuffix(empty.Panels[0].Title, ": not measured") || !strings.HasSuffix(empty.Panels[1].Title, ": not measured") {
		t.Errorf("empty figure %+v, %v", empty, err)
	}
}

// TestDrawFigureNoSymplot: without symplot or Go the figure is not drawn,
// which is errNoSymplot with the command to draw it, not a failure.
func TestDrawFigureNoSymplot(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := drawFigure("", "plot.json", "plot.png")
	if !errors.Is(err, errNoSymplot) || !strings.Contains(err.Error(), "go run . -in ") {
		t.Errorf("drawFigure without symplot: %v", err)
	}
}

func TestSuiteFlags(t *testing.T) {
	o, err := parseSuiteFlags([]string{"--out", "x", "--skip", "gpu", "--train-args", "--reps 1 --pes 1,2"})
	if err != nil || o.out != "x" || !slices.Equal(o.skip, []string{"gpu"}) || !slices.Equal(o.train, []string{"--reps", "1", "--pes", "1,2"}) {
		t.Fatalf("parseSuiteFlags = %+v, %v", o, err)
	}
	if _, err := parseSuiteFlags([]string{"--skip", "everything"}); err == nil {
		t.Error("--skip everything accepted")
	}
}
