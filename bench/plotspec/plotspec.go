// Package plotspec describes a figure of line charts as data: what
// `symbench all` writes (plot.json) and bench/symplot draws into a PNG.
//
// The description lives here, in the main module and without dependencies,
// so that symbench chooses what to draw while the drawing, and the plotting
// library with its font, PDF and LaTeX modules, stays in symplot's own
// module, outside the dependency graph of symddp and of its users.
package plotspec

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// Figure is panels in one image: side by side, or in rows of Columns.
type Figure struct {
	Width   float64 `json:"width_in"`  // inches
	Height  float64 `json:"height_in"` // inches
	DPI     int     `json:"dpi"`
	Columns int     `json:"columns,omitempty"` // panels per row; 0: all in one row
	Panels  []Panel `json:"panels"`
}

// Grid is the figure's rows and columns of panels.
func (f Figure) Grid() (rows, cols int) {
	n := len(f.Panels)
	if n == 0 {
		return 0, 0
	}
	cols = f.Columns
	if cols <= 0 || cols > n {
		cols = n
	}
	return (n + cols - 1) / cols, cols
}

// Panel is one chart.
type Panel struct {
	Title  string `json:"title"`
	XLabel string `json:"x_label"`
	YLabel string `json:"y_label"`
	LogX   bool   `json:"log_x,omitempty"`
	XTicks []Tick `json:"x_ticks,omitempty"` // empty: chosen by the plotter
	YFrom0 bool   `json:"y_from_0,omitempty"`
	// LegendAbove raises the top of the y axis so that the legend, in
	// the top left corner, lies above every line instead of over them.
	LegendAbove bool     `json:"legend_above,omitempty"`
	Lines       []Line   `json:"lines,omitempty"`
	Markers     []Marker `json:"markers,omitempty"`
}

// Tick is a labelled position on an axis.
type Tick struct {
	Value float64 `json:"value"`
	Label string  `json:"label"`
}

// Grey is the Color of a reference line.
const Grey = -1

// Line is a named line through points, with a glyph at each unless
// NoGlyphs (a line of many points reads better without).
type Line struct {
	Name     string    `json:"name"`
	Color    int       `json:"color"`            // index into the plotter's palette, or Grey
	Dashes   []float64 `json:"dashes,omitempty"` // on, off lengths in points; empty: solid
	NoGlyphs bool      `json:"no_glyphs,omitempty"`
	Points   []Point   `json:"points"`
}

// Marker is a single named point, drawn as a cross.
type Marker struct {
	Name string `json:"name"`
	At   Point  `json:"at"`
}

// Point is a position in data coordinates.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Check returns an error naming the first point no chart can draw: not
// finite, or at x <= 0 on a logarithmic axis.
func (f Figure) Check() error {
	if f.Width <= 0 || f.Height <= 0 || f.DPI <= 0 {
		return fmt.Errorf("plot: size %gx%g in at %d dpi", f.Width, f.Height, f.DPI)
	}
	if f.Columns < 0 {
		return fmt.Errorf("plot: %d columns", f.Columns)
	}
	bad := func(p Panel, pt Point) bool {
		return math.IsNaN(pt.X) || math.IsInf(pt.X, 0) || math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) || (p.LogX && pt.X <= 0)
	}
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			for _, pt := range l.Points {
				if bad(p, pt) {
					return fmt.Errorf("plot %q, line %q: bad point %v", p.Title, l.Name, pt)
				}
			}
		}
		for _, m := range p.Markers {
			if bad(p, m.At) {
				return fmt.Errorf("plot %q, marker %q: bad point %v", p.Title, m.Name, m.At)
			}
		}
	}
	return nil
}

// Write saves f as JSON at path.
func (f Figure) Write(path string) error {
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read loads a figure written by Write and checks it.
func Read(path string) (Figure, error) {
	var f Figure
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, f.Check()
}
