package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"

	"github.com/symddp/symddp/bench/plotspec"
	"github.com/symddp/symddp/internal/units"
)

// The figure of `symbench all`: symbench decides what it shows (a
// plotspec.Figure, saved as plot.json); bench/symplot, a module of its own,
// draws it, so that the plotting library stays out of symddp's go.mod.

// busbwPoint is one allreduce measurement for the plot.
type busbwPoint struct {
	npes  int
	bytes int64
	shm   float64 // GB/s
	mpi   float64 // GB/s; 0 when not measured
}

// suiteFigure is the figure of `symbench all`: allreduce busbw against
// buffer size for every N (shm solid, Open MPI dashed) on the left, training
// samples/s against PEs on the right. Either input may be empty; its panel
// then says so.
func suiteFigure(ar []busbwPoint, tr *cpuTrainReport) plotspec.Figure {
	return plotspec.Figure{Width: 13, Height: 5, DPI: 96, Panels: []plotspec.Panel{busbwPanel(ar), samplesPanel(tr)}}
}

// dashed is the dash pattern of Open MPI's lines; dotted that of the
// reference line.
var (
	dashed = []float64{5, 3}
	dotted = []float64{2, 3}
)

// busbwPanel is the allreduce panel.
func busbwPanel(ar []busbwPoint) plotspec.Panel {
	p := plotspec.Panel{Title: "allreduce busbw, float32 sum (shm solid, Open MPI dashed)", XLabel: "buffer size", YLabel: "busbw (GB/s)"}
	if len(ar) == 0 {
		p.Title += ": not measured"
		return p
	}
	p.LogX = true
	byN := map[int][]busbwPoint{}
	var sizes []int64
	for _, pt := range ar {
		if !slices.Contains(sizes, pt.bytes) {
			sizes = append(sizes, pt.bytes)
		}
		byN[pt.npes] = append(byN[pt.npes], pt)
	}
	slices.Sort(sizes)
	for _, s := range sizes {
		p.XTicks = append(p.XTicks, plotspec.Tick{Value: float64(s), Label: units.Bytes(s)})
	}
	ns := make([]int, 0, len(byN))
	for n := range byN {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for i, n := range ns {
		pts := byN[n]
		sort.Slice(pts, func(a, b int) bool { return pts[a].bytes < pts[b].bytes })
		shm := plotspec.Line{Name: fmt.Sprintf("shm N=%d", n), Color: i}
		mpi := plotspec.Line{Name: fmt.Sprintf("MPI N=%d", n), Color: i, Dashes: dashed}
		for _, pt := range pts {
			shm.Points = append(shm.Points, plotspec.Point{X: float64(pt.bytes), Y: pt.shm})
			if pt.mpi > 0 {
				mpi.Points = append(mpi.Points, plotspec.Point{X: float64(pt.bytes), Y: pt.mpi})
			}
		}
		p.Lines = append(p.Lines, shm)
		if len(mpi.Points) > 0 {
			p.Lines = append(p.Lines, mpi)
		}
	}
	return p
}

// samplesPanel is the training panel: samples/s against PEs for every
// update mode, the one-PE runs, and perfect scaling of one PE on one thread
// up to the host's CPUs.
func samplesPanel(tr *cpuTrainReport) plotspec.Panel {
	p := plotspec.Panel{Title: "train mlp, samples/s (median)", XLabel: "PEs", YLabel: "samples/s"}
	if tr == nil || len(tr.Results) == 0 {
		p.Title += ": not measured"
		return p
	}
	if q := tr.quietRuns(); len(q.Results) == len(tr.Results) {
		p.Title = fmt.Sprintf("train mlp, samples/s (median of the runs with other processes <= %.2f CPUs)", tr.Quiet)
		tr = &q
	} else {
		p.Title = "train mlp, samples/s (median of all runs)"
	}
	p.LogX, p.YFrom0 = true, true
	pes := tr.peCounts()
	for _, n := range pes {
		p.XTicks = append(p.XTicks, plotspec.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	base1 := tr.find(cpuTrainJob{PEs: 1, Threads: 1})
	for i, b := range tr.bucketSizes() {
		l := plotspec.Line{Name: bucketName(b), Color: i}
		if base1 != nil {
			s, _ := base1.median()
			l.Points = append(l.Points, plotspec.Point{X: 1, Y: s})
		}
		for _, n := range pes {
			if r := tr.find(cpuTrainJob{PEs: n, Bucket: b}); r != nil {
				s, _ := r.median()
				l.Points = append(l.Points, plotspec.Point{X: float64(n), Y: s})
			}
		}
		p.Lines = append(p.Lines, l)
	}
	if base1 != nil {
		s, _ := base1.median()
		ideal := plotspec.Line{Name: fmt.Sprintf("1 PE, 1 thread x min(PEs, %d CPUs)", tr.CPUs), Color: plotspec.Grey, Dashes: dotted}
		for _, n := range pes {
			ideal.Points = append(ideal.Points, plotspec.Point{X: float64(n), Y: s * float64(min(n, tr.CPUs))})
		}
		p.Lines = append(p.Lines, ideal)
	}
	if r := tr.find(cpuTrainJob{PEs: 1, Threads: tr.CPUs}); r != nil && tr.CPUs > 1 {
		s, _ := r.median()
		p.Markers = append(p.Markers, plotspec.Marker{Name: fmt.Sprintf("1 PE, %d BLAS threads", tr.CPUs), At: plotspec.Point{X: 1, Y: s}})
	}
	return p
}

// errNoSymplot says that no plotter was found: the figure is saved as JSON
// only, which is not a failure of the benchmarks.
var errNoSymplot = errors.New("no symplot")

// drawFigure draws the figure saved at spec into the PNG at png with
// symplot: the binary bin when given; else symplot beside this binary or
// on PATH; else `go run` of bench/symplot in the module root (its modules
// come through the Go module proxy the first time). It returns an error
// wrapping errNoSymplot, with the command to draw it later, when there is
// none of them.
func drawFigure(bin, spec, png string) error {
	var err error
	if spec, err = filepath.Abs(spec); err != nil {
		return err
	}
	if png, err = filepath.Abs(png); err != nil {
		return err
	}
	args := []string{"-in", spec, "-out", png}
	var cmd *exec.Cmd
	if bin == "" {
		if self, err := os.Executable(); err == nil {
			if beside := filepath.Join(filepath.Dir(self), "symplot"); fileExists(beside) {
				bin = beside
			}
		}
	}
	if bin == "" {
		if p, err := exec.LookPath("symplot"); err == nil {
			bin = p
		}
	}
	dir := filepath.Join(moduleRoot(), "bench", "symplot")
	switch gobin, err := exec.LookPath("go"); {
	case bin != "":
		cmd = exec.Command(bin, args...)
	case err == nil && fileExists(filepath.Join(dir, "go.mod")):
		cmd = exec.Command(gobin, append([]string{"run", "."}, args...)...)
		cmd.Dir = dir
	default:
		return fmt.Errorf("%w beside symbench, on PATH or in bench/symplot of a module with a go command: draw it with `cd bench/symplot && go run . -in %s -out %s`",
			errNoSymplot, spec, png)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", cmd.String(), err, out)
	}
	return nil
}
