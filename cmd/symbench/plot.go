package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// busbwPoint is one allreduce measurement for the plot.
type busbwPoint struct {
	npes  int
	bytes int64
	shm   float64 // GB/s
	mpi   float64 // GB/s; 0 when not measured
}

// writeSuitePlot draws the results of `symbench all` into a PNG at path:
// allreduce busbw against buffer size for every N (shm solid, Open MPI
// dashed) on the left, training samples/s against PEs on the right. Either
// input may be empty; its panel then says so.
func writeSuitePlot(path string, ar []busbwPoint, tr *cpuTrainReport) error {
	left, err := busbwPlot(ar)
	if err != nil {
		return err
	}
	right, err := samplesPlot(tr)
	if err != nil {
		return err
	}
	img := vgimg.NewWith(vgimg.UseWH(13*vg.Inch, 5*vg.Inch), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 8, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// busbwPlot is the allreduce panel.
func busbwPlot(ar []busbwPoint) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "allreduce busbw, float32 sum (shm solid, Open MPI dashed)"
	p.X.Label.Text = "buffer size"
	p.Y.Label.Text = "busbw (GB/s)"
	p.Legend.Top = true
	p.Legend.Left = true
	if len(ar) == 0 {
		p.Title.Text += ": not measured"
		return p, nil
	}
	p.X.Scale = plot.LogScale{}
	byN := map[int][]busbwPoint{}
	var sizes []int64
	for _, pt := range ar {
		if !slices.Contains(sizes, pt.bytes) {
			sizes = append(sizes, pt.bytes)
		}
		byN[pt.npes] = append(byN[pt.npes], pt)
	}
	slices.Sort(sizes)
	var ticks []plot.Tick
	for _, s := range sizes {
		ticks = append(ticks, plot.Tick{Value: float64(s), Label: formatBytes(s)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	ns := make([]int, 0, len(byN))
	for n := range byN {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for i, n := range ns {
		pts := byN[n]
		sort.Slice(pts, func(a, b int) bool { return pts[a].bytes < pts[b].bytes })
		var shm, mpi plotter.XYs
		for _, pt := range pts {
			shm = append(shm, plotter.XY{X: float64(pt.bytes), Y: pt.shm})
			if pt.mpi > 0 {
				mpi = append(mpi, plotter.XY{X: float64(pt.bytes), Y: pt.mpi})
			}
		}
		c := plotutil.Color(i)
		if err := addLine(p, shm, c, nil, fmt.Sprintf("shm N=%d", n)); err != nil {
			return nil, err
		}
		if len(mpi) > 0 {
			if err := addLine(p, mpi, c, []vg.Length{vg.Points(5), vg.Points(3)}, fmt.Sprintf("MPI N=%d", n)); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// samplesPlot is the training panel: samples/s against PEs for every bucket
// size, the one-PE runs, and perfect scaling of one PE on one thread up to
// the host's CPUs.
func samplesPlot(tr *cpuTrainReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "train mlp, samples/s (median)"
	p.X.Label.Text = "PEs"
	p.Y.Label.Text = "samples/s"
	p.Legend.Top = true
	p.Legend.Left = true
	if tr == nil || len(tr.Results) == 0 {
		p.Title.Text += ": not measured"
		return p, nil
	}
	if q := tr.quietRuns(); len(q.Results) == len(tr.Results) {
		p.Title.Text = fmt.Sprintf("train mlp, samples/s (median of the runs with other processes <= %.2f CPUs)", tr.Quiet)
		tr = &q
	} else {
		p.Title.Text = "train mlp, samples/s (median of all runs)"
	}
	p.X.Scale = plot.LogScale{}
	pes := tr.peCounts()
	var ticks []plot.Tick
	for _, n := range pes {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min = 0
	base1 := tr.find(cpuTrainJob{PEs: 1, Threads: 1})
	for i, b := range tr.bucketSizes() {
		var xy plotter.XYs
		if base1 != nil {
			s, _ := base1.median()
			xy = append(xy, plotter.XY{X: 1, Y: s})
		}
		for _, n := range pes {
			if r := tr.find(cpuTrainJob{PEs: n, Bucket: b}); r != nil {
				s, _ := r.median()
				xy = append(xy, plotter.XY{X: float64(n), Y: s})
			}
		}
		if err := addLine(p, xy, plotutil.Color(i), nil, bucketName(b)); err != nil {
			return nil, err
		}
	}
	if base1 != nil {
		s, _ := base1.median()
		var ideal plotter.XYs
		for _, n := range pes {
			ideal = append(ideal, plotter.XY{X: float64(n), Y: s * float64(min(n, tr.CPUs))})
		}
		grey := color.Gray{Y: 128}
		if err := addLine(p, ideal, grey, []vg.Length{vg.Points(2), vg.Points(3)},
			fmt.Sprintf("1 PE, 1 thread x min(PEs, %d CPUs)", tr.CPUs)); err != nil {
			return nil, err
		}
	}
	if r := tr.find(cpuTrainJob{PEs: 1, Threads: tr.CPUs}); r != nil && tr.CPUs > 1 {
		s, _ := r.median()
		sc, err := plotter.NewScatter(plotter.XYs{{X: 1, Y: s}})
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Shape = draw.CrossGlyph{}
		sc.GlyphStyle.Radius = vg.Points(5)
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("1 PE, %d BLAS threads", tr.CPUs), sc)
	}
	return p, nil
}

// addLine adds a line with points and a legend entry.
func addLine(p *plot.Plot, xy plotter.XYs, c color.Color, dashes []vg.Length, name string) error {
	if len(xy) == 0 {
		return nil
	}
	for _, pt := range xy {
		if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) || pt.X <= 0 {
			return fmt.Errorf("plot %s: bad point %v", name, pt)
		}
	}
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	l.LineStyle.Color, l.LineStyle.Width, l.LineStyle.Dashes = c, vg.Points(1.5), dashes
	s.GlyphStyle.Color, s.GlyphStyle.Radius = c, vg.Points(2)
	p.Add(l, s)
	p.Legend.Add(name, l)
	return nil
}
