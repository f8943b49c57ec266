package plotspec

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	ok := Figure{Width: 13, Height: 5, DPI: 96, Panels: []Panel{{Title: "a", LogX: true,
		Lines: []Line{{Name: "l", Points: []Point{{X: 1, Y: 0}, {X: 2, Y: -1}}}}}}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		edit func(*Figure)
		want string
	}{
		"zero x on log axis": {func(f *Figure) { f.Panels[0].Lines[0].Points[0].X = 0 }, `line "l"`},
		"NaN y":              {func(f *Figure) { f.Panels[0].Lines[0].Points[1].Y = math.NaN() }, `line "l"`},
		"Inf marker":         {func(f *Figure) { f.Panels[0].Markers = []Marker{{Name: "m", At: Point{X: math.Inf(1), Y: 1}}} }, `marker "m"`},
		"no size":            {func(f *Figure) { f.DPI = 0 }, "dpi"},
		"negative columns":   {func(f *Figure) { f.Columns = -1 }, "columns"},
	} {
		f := ok
		f.Panels = []Panel{ok.Panels[0]}
		f.Panels[0].Lines = []Line{{Name: "l", Points: append([]Point(nil), ok.Panels[0].Lines[0].Points...)}}
		c.edit(&f)
		if err := f.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", name, err, c.want)
		}
	}
	// Zero is fine on a linear axis.
	lin := ok
	lin.Panels = []Panel{{Lines: []Line{{Name: "l", Points: []Point{{X: 0, Y: 0}}}}}}
	if err := lin.Check(); err != nil {
		t.Errorf("linear axis at x = 0: %v", err)
	}
}

func TestWriteRead(t *testing.T) {
	f := Figure{Width: 6, Height: 4, DPI: 72, Columns: 2, Panels: []Panel{{Title: "t", XTicks: []Tick{{Value: 1, Label: "1"}}, LegendAbove: true,
		Lines:   []Line{{Name: "l", Color: Grey, Dashes: []float64{2, 3}, NoGlyphs: true, Points: []Point{{X: 1, Y: 2}}}},
		Markers: []Marker{{Name: "m", At: Point{X: 1, Y: 3}}}}}}
	path := filepath.Join(t.TempDir(), "plot.json")
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("read %+v, wrote %+v", got, f)
	}
}

// TestGrid: Columns panels per row, the last row partly filled; no Columns
// (what symbench writes) is one row.
func TestGrid(t *testing.T) {
	for _, c := range []struct{ panels, columns, rows, cols int }{
		{4, 0, 1, 4}, {4, 2, 2, 2}, {5, 3, 2, 3}, {2, 3, 1, 2}, {1, 2, 1, 1}, {0, 2, 0, 0},
	} {
		f := Figure{Columns: c.columns, Panels: make([]Panel, c.panels)}
		if r, k := f.Grid(); r != c.rows || k != c.cols {
			t.Errorf("%d panels, %d columns: grid %dx%d, want %dx%d", c.panels, c.columns, r, k, c.rows, c.cols)
		}
	}
}
