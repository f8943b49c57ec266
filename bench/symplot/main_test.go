package main

import (
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/symddp/symddp/bench/plotspec"
)

// figure is two panels like symbench's: a log-x chart with ticks, a solid
// and a dashed line, and one with a grey reference line and a marker.
func figure() plotspec.Figure {
	return plotspec.Figure{Width: 13, Height: 5, DPI: 96, Panels: []plotspec.Panel{
		{Title: "busbw", XLabel: "size", YLabel: "GB/s", LogX: true,
			XTicks: []plotspec.Tick{{Value: 4096, Label: "4 KiB"}, {Value: 1 << 20, Label: "1 MiB"}},
			Lines: []plotspec.Line{
				{Name: "shm N=2", Color: 0, Points: []plotspec.Point{{X: 4096, Y: 4.9}, {X: 1 << 20, Y: 18}}},
				{Name: "MPI N=2", Color: 0, Dashes: []float64{5, 3}, Points: []plotspec.Point{{X: 4096, Y: 1.3}, {X: 1 << 20, Y: 5}}},
			}},
		{Title: "samples/s", XLabel: "PEs", YLabel: "samples/s", LogX: true, YFrom0: true,
			Lines:   []plotspec.Line{{Name: "ideal", Color: plotspec.Grey, Dashes: []float64{2, 3}, Points: []plotspec.Point{{X: 1, Y: 5e4}, {X: 2, Y: 1e5}}}},
			Markers: []plotspec.Marker{{Name: "1 PE, 2 threads", At: plotspec.Point{X: 1, Y: 6e4}}}},
	}}
}

// TestWritePNG: the figure becomes a PNG of its size in pixels, with data
// and with empty panels; a bad point is refused with its line's name.
func TestWritePNG(t *testing.T) {
	empty := plotspec.Figure{Width: 13, Height: 5, DPI: 96, Panels: []plotspec.Panel{{Title: "a: not measured"}, {Title: "b: not measured"}}}
	// One PE count only: one x value on a logarithmic axis.
	single := figure()
	single.Panels[1].Lines[0].Points = single.Panels[1].Lines[0].Points[:1]
	for name, f := range map[string]plotspec.Figure{"data": figure(), "empty": empty, "single": single} {
		path := filepath.Join(t.TempDir(), "plot.png")
		if err := writePNG(path, f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != 13*96 || b.Dy() != 5*96 {
			t.Errorf("%s: image of %v, want 1248x480", name, b)
		}
	}
	bad := figure()
	bad.Panels[0].Lines[1].Points[0].X = 0 // not on a log axis
	if err := writePNG(filepath.Join(t.TempDir(), "bad.png"), bad); err == nil || !strings.Contains(err.Error(), `"MPI N=2"`) {
		t.Errorf("bad point: error %v", err)
	}
}

// TestReadWritten: what plotspec writes, symplot reads back unchanged.
func TestReadWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plot.json")
	if err := figure().Write(path); err != nil {
		t.Fatal(err)
	}
	f, err := plotspec.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Panels) != 2 || f.Panels[0].Lines[1].Dashes[0] != 5 || f.Panels[1].Markers[0].At.Y != 6e4 || f.Panels[1].Lines[0].Color != plotspec.Grey {
		t.Errorf("read back %+v", f)
	}
}

// TestWritePNGGrid: with Columns the panels fill rows left to right, and
// the tile after the last panel stays blank.
func TestWritePNGGrid(t *testing.T) {
	f := figure()
	f.Width, f.Height, f.Columns = 8, 6, 2
	f.Panels = append(f.Panels, f.Panels[1])
	f.Panels[2].Title = "third"
	f.Panels[0].Lines[0].NoGlyphs = true
	path := filepath.Join(t.TempDir(), "grid.png")
	if err := writePNG(path, f); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path)
	if b := img.Bounds(); b.Dx() != 8*96 || b.Dy() != 6*96 {
		t.Fatalf("image of %v, want 768x576", b)
	}
	inked := func(x0, y0, x1, y1 int) int {
		n := 0
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				if r, g, b, _ := img.At(x, y).RGBA(); r&g&b < 0xf000 {
					n++
				}
			}
		}
		return n
	}
	w, h := 8*96, 6*96
	for name, q := range map[string][4]int{"top left": {0, 0, w / 2, h / 2}, "top right": {w / 2, 0, w, h / 2}, "bottom left": {0, h / 2, w / 2, h}} {
		if inked(q[0], q[1], q[2], q[3]) == 0 {
			t.Errorf("%s tile: blank, want a panel", name)
		}
	}
	if n := inked(w/2+10, h/2+10, w, h); n != 0 {
		t.Errorf("bottom right tile: %d pixels drawn, want none", n)
	}
}

// decodePNG reads the PNG at path.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	img, err := png.Decode(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// TestLegendAbove: a panel with LegendAbove gets a y axis tall enough that
// its highest point lies below the legend; one without keeps its range.
func TestLegendAbove(t *testing.T) {
	line := plotspec.Line{Name: "a rather long run name", Points: []plotspec.Point{{X: 0, Y: 4.5}, {X: 10, Y: 3}, {X: 20, Y: 2.5}}}
	f := plotspec.Figure{Width: 12, Height: 4, DPI: 96, Panels: []plotspec.Panel{
		{Title: "raised", LegendAbove: true, Lines: []plotspec.Line{line, line}},
		{Title: "as is", Lines: []plotspec.Line{line}},
	}}
	grid := [][]*plot.Plot{make([]*plot.Plot, 2)}
	for i, s := range f.Panels {
		var err error
		if grid[0][i], err = panel(s); err != nil {
			t.Fatal(err)
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(12*vg.Inch, 4*vg.Inch), vgimg.UseDPI(96))
	canvases := plot.Align(grid, draw.Tiles{Rows: 1, Cols: 2}, draw.New(img))
	if !raiseForLegends(f, grid, canvases) {
		t.Fatal("no panel raised")
	}
	p := grid[0][0]
	data := p.DataCanvas(canvases[0][0])
	legendBottom := data.Max.Y - p.Legend.Rectangle(data).Size().Y // the legend's top is at or above the data's
	highest := data.Min.Y + data.Size().Y*vg.Length((4.5-p.Y.Min)/(p.Y.Max-p.Y.Min))
	if p.Y.Min != 2.5 || highest >= legendBottom {
		t.Errorf("y from %g to %g: the highest point at %v, the legend's bottom at %v", p.Y.Min, p.Y.Max, highest, legendBottom)
	}
	if q := grid[0][1]; q.Y.Min != 2.5 || q.Y.Max != 4.5 {
		t.Errorf("panel without LegendAbove: y from %g to %g, want 2.5 to 4.5", q.Y.Min, q.Y.Max)
	}
}

// TestOneYValue: a panel whose points share one y value spans 10% around
// it, not gonum's [y-1, y+1].
func TestOneYValue(t *testing.T) {
	p, err := panel(plotspec.Panel{Lines: []plotspec.Line{{Name: "l", Points: []plotspec.Point{{X: 200, Y: 0.4}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(p.Y.Min-0.36) > 1e-12 || math.Abs(p.Y.Max-0.44) > 1e-12 {
		t.Errorf("y from %g to %g, want 0.36 to 0.44", p.Y.Min, p.Y.Max)
	}
}
