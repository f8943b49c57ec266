// Command symplot draws figures into PNGs: one that `symbench all`
// described (plot.json, a plotspec.Figure), or the metrics logs of training
// runs (`train --metrics`), one line per run, to compare them by eye:
//
//	symplot -in plot.json -out symbench.png
//	symplot metrics -out runs.png [-label NAME]... a.jsonl [b.jsonl ...]
//
// It is a module of its own so that gonum/plot, and the font, PDF and LaTeX
// modules that come with it, are not in symddp's go.mod: symbench runs it
// (`go run .` in this directory when no symplot binary is at hand).
package main

import (
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/symddp/symddp/bench/plotspec"
)

const usage = `usage:
  symplot -in plot.json -out plot.png
	draw the figure that symbench all described
  symplot metrics -out runs.png [-label NAME]... a.jsonl [b.jsonl ...]
	draw train --metrics logs against step, one line per log: training
	loss, validation (or test) loss, test accuracy, learning rate and
	throughput; run symplot metrics -h for more
`

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// run is symplot with args, its errors written to stderr; it returns the
// exit status: 0, 1 for a file it could not read or write, 2 for bad usage.
func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "metrics" {
		return runMetrics(args[1:], stderr)
	}
	fs := flag.NewFlagSet("symplot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	in := fs.String("in", "", "figure to draw (JSON, as symbench all writes it)")
	out := fs.String("out", "", "PNG to write")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: symplot -in plot.json -out plot.png")
		return 2
	}
	f, err := plotspec.Read(*in)
	if err == nil {
		err = writePNG(*out, f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "symplot: %v\n", err)
		return 1
	}
	return 0
}

// writePNG draws f's panels into a PNG at path: side by side, or in rows
// of f.Columns.
func writePNG(path string, f plotspec.Figure) error {
	if err := f.Check(); err != nil {
		return err
	}
	if len(f.Panels) == 0 {
		return fmt.Errorf("%s: the figure has no panels", path)
	}
	rows, cols := f.Grid()
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols) // nil: an empty tile after the last panel
	}
	for i, p := range f.Panels {
		var err error
		if grid[i/cols][i%cols], err = panel(p); err != nil {
			return err
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(f.Width)*vg.Inch, vg.Length(f.Height)*vg.Inch), vgimg.UseDPI(f.DPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 8, PadY: vg.Millimeter * 8, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(grid, tiles, dc)
	if raiseForLegends(f, grid, canvases) {
		canvases = plot.Align(grid, tiles, dc) // the y tick labels may have changed width
	}
	for r, row := range grid {
		for c, p := range row {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		w.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return w.Close()
}

// raiseForLegends raises the top of the y axis of each panel of f that
// asks for LegendAbove so that its legend, as tall on canvas c as it is,
// lies above the data; it reports whether it changed any.
func raiseForLegends(f plotspec.Figure, grid [][]*plot.Plot, canvases [][]draw.Canvas) bool {
	changed := false
	for i, s := range f.Panels {
		p, c := grid[i/len(grid[0])][i%len(grid[0])], canvases[i/len(grid[0])][i%len(grid[0])]
		if !s.LegendAbove || p.Y.Max <= p.Y.Min {
			continue // no data
		}
		data := p.DataCanvas(c)
		legend := p.Legend.Rectangle(data).Size().Y + p.Legend.TextStyle.FontExtents().Descent + vg.Points(4)
		frac := float64(legend / data.Size().Y)
		if frac <= 0 || frac > 0.6 {
			continue // no legend, or one that leaves no room for the data
		}
		p.Y.Max += (p.Y.Max - p.Y.Min) * frac / (1 - frac)
		changed = true
	}
	return changed
}

// panel is one chart of the figure.
func panel(s plotspec.Panel) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = s.Title, s.XLabel, s.YLabel
	p.Legend.Top, p.Legend.Left = true, true
	if s.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{}
	}
	if len(s.XTicks) > 0 {
		ticks := make([]plot.Tick, len(s.XTicks))
		for i, t := range s.XTicks {
			ticks[i] = plot.Tick{Value: t.Value, Label: t.Label}
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	p.Y.Tick.Marker = trimmedTicks{}
	if s.YFrom0 {
		p.Y.Min = 0
	}
	for _, l := range s.Lines {
		if len(l.Points) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(l.Points))
		for i, pt := range l.Points {
			xy[i] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		line, glyphs, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("plot %q, line %q: %w", s.Title, l.Name, err)
		}
		c := colorOf(l.Color)
		var dashes []vg.Length
		for _, d := range l.Dashes {
			dashes = append(dashes, vg.Points(d))
		}
		line.LineStyle.Color, line.LineStyle.Width, line.LineStyle.Dashes = c, vg.Points(1.5), dashes
		glyphs.GlyphStyle.Color, glyphs.GlyphStyle.Radius = c, vg.Points(2)
		if l.NoGlyphs {
			p.Add(line)
		} else {
			p.Add(line, glyphs)
		}
		p.Legend.Add(l.Name, line)
	}
	for _, m := range s.Markers {
		sc, err := plotter.NewScatter(plotter.XYs{{X: m.At.X, Y: m.At.Y}})
		if err != nil {
			return nil, fmt.Errorf("plot %q, marker %q: %w", s.Title, m.Name, err)
		}
		sc.GlyphStyle.Shape = draw.CrossGlyph{}
		sc.GlyphStyle.Radius = vg.Points(5)
		p.Add(sc)
		p.Legend.Add(m.Name, sc)
	}
	if p.Y.Min == p.Y.Max && p.Y.Min != 0 {
		// One y value: gonum would widen the range to [y-1, y+1] whatever
		// the scale (a loss of 0.4 between -0.6 and 1.4); widen it by 10%.
		d := math.Abs(p.Y.Min) / 10
		p.Y.Min, p.Y.Max = p.Y.Min-d, p.Y.Max+d
	}
	if s.LogX && p.X.Min == p.X.Max && p.X.Min > 0 {
		// One x value: gonum would widen the range to [x-1, x+1], which
		// reaches 0 for x = 1 on the logarithmic axis; widen it by 2x.
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	return p, nil
}

// colorOf is the palette's i-th colour, or grey for plotspec.Grey.
func colorOf(i int) color.Color {
	if i == plotspec.Grey {
		return color.Gray{Y: 128}
	}
	return plotutil.Color(i)
}
