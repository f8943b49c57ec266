// Package layertest checks a models.Layer of one's own as symddp checks
// its layers: every parameter gradient and the input gradient against
// central differences, and what the Layer contract promises besides
// (Backward overwrites the gradients, or adds to those Build.AddGrads
// marks; Forward is deterministic; the output has the shape Build
// returned). It runs on a CPU engine (cpu.New), where tensors are host
// memory.
//
// In a test:
//
//	l := NewConv2D("conv", 2, 3, 3, Same, compute.Identity)
//	if _, err := layertest.Check(e, l, 2, []int{2, 6, 5}, layertest.Options{}); err != nil {
//		t.Fatal(err)
//	}
//
// The objective is Σ R ⊙ l(x) for random R; Backward(R) gives its
// gradients, and each element v of a parameter or of x is moved to
// v ± Eps (float32 values, the quotient taken in float64) to give a
// central difference. A layer with kinks (ReLU, max pooling) is
// differentiable only away from them: Options.Accept keeps the draws
// whose branch points lie farther than Eps from every element.
package layertest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
	"github.com/symddp/symddp/models"
)

// The defaults of Options: central differences with steps of 5e-3 on
// values of magnitude up to 1. The quotient's error is Eps² times a third
// derivative, plus the float32 rounding of the output over 2·Eps; the fp32
// layers of package models pass with room to spare (at half these
// tolerances too, over 30 seeds), and a gradient 1% off fails.
const (
	DefaultEps  = 5e-3
	DefaultAtol = 5e-4
	DefaultRtol = 5e-3
)

// maxDraws bounds how many draws Accept may refuse.
const maxDraws = 1000

// Options tune Check. The zero value checks everything with the defaults.
type Options struct {
	// Eps is the step of the central differences; an analytic derivative
	// and a difference quotient agree when they differ by at most
	// Atol + Rtol·|quotient|. Zero: DefaultEps, DefaultAtol, DefaultRtol.
	Eps, Atol, Rtol float64
	// Seed seeds the draws of the parameters and the input (uniform in
	// [-1, 1)) and of R.
	Seed uint64
	// FirstLayer builds the layer with NeedInputGrad false, as the first
	// layer of a model is: the input gradient is not checked.
	FirstLayer bool
	// Accept, when set, sees each draw of the parameters (one slice per
	// ParamSpec, in Params order) and of the input (Batch·In... values,
	// row-major); Check draws again until it returns true. A layer with a
	// kink uses it to keep every pre-activation (or the gap between
	// competitors for a maximum) farther than a few Eps from it.
	Accept func(params [][]float32, x []float32) bool
}

func (o Options) tolerance() gradcheck.Tolerance {
	t := gradcheck.Tolerance{Eps: o.Eps, Atol: o.Atol, Rtol: o.Rtol}
	if t.Eps == 0 {
		t.Eps = DefaultEps
	}
	if t.Atol == 0 {
		t.Atol = DefaultAtol
	}
	if t.Rtol == 0 {
		t.Rtol = DefaultRtol
	}
	return t
}

// Check builds l on e for batch samples of shape in, and checks it (see
// the package comment). It returns how many gradient elements it compared
// with central differences, and an error that names every check that
// failed: for gradients, the parameter (its ParamSpec name, or "input")
// and the element, at most a few per tensor. Check builds l more than once
// and leaves it built.
func Check(e compute.Engine, l models.Layer, batch int, in []int, o Options) (checked int, err error) {
	what := fmt.Sprintf("layertest: %T (batch %d, input %v)", l, batch, in)
	c, err := build(e, l, batch, in, o)
	if err == nil {
		err = c.forward()
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	c.backward()
	if checked = c.gradients(); checked == 0 {
		return 0, fmt.Errorf("%s: nothing to check: no parameters, and FirstLayer skips the input gradient", what)
	}
	c.addGrads()
	if len(c.problems) > 0 {
		return checked, fmt.Errorf("%s:\n\t%s", what, strings.Join(c.problems, "\n\t"))
	}
	return checked, nil
}

// checker is one Check: the layer built on its arenas, the input x, the
// objective's R, and what the checks found.
type checker struct {
	e        compute.Engine
	l        models.Layer
	o        Options
	r        *rand.Rand
	b        models.Build
	specs    []models.ParamSpec
	a        *arenas
	xs       []float32 // the input as drawn
	x, dy    compute.Tensor
	rs       []float32 // R, (Batch, Out...)
	g, dx    []float32 // Backward's gradients onto zeros
	problems []string
}

// build draws the parameters and the input (until Accept takes them), R,
// and builds l.
func build(e compute.Engine, l models.Layer, batch int, in []int, o Options) (*checker, error) {
	if batch < 1 || slices.ContainsFunc(in, func(d int) bool { return d < 1 }) {
		return nil, fmt.Errorf("batch %d and sample shape %v: want positive sizes", batch, in)
	}
	if compute.HostData(e.Alloc(1)) == nil {
		return nil, fmt.Errorf("engine %s keeps tensors off the host: use a CPU engine", e.Name())
	}
	c := &checker{e: e, l: l, o: o, r: rand.New(rand.NewPCG(o.Seed, 0x6c61796572)), specs: l.Params()}
	c.a = newArenas(e, c.specs)
	c.xs = make([]float32, batch*compute.Shape(in).Size())
	for n := 0; ; n++ {
		if n == maxDraws {
			return nil, fmt.Errorf("Accept refused %d draws", maxDraws)
		}
		gradcheck.Fill(c.r, c.a.params)
		gradcheck.Fill(c.r, c.xs)
		if o.Accept == nil || o.Accept(c.a.param, c.xs) {
			break
		}
	}
	c.b = models.Build{Engine: e, Batch: batch, Params: c.a.pv, Grads: c.a.gv, In: slices.Clone(in), NeedInputGrad: !o.FirstLayer}
	out, err := l.Build(c.b)
	if err != nil {
		return nil, fmt.Errorf("Build: %w", err)
	}
	if len(out) == 0 || slices.ContainsFunc(out, func(d int) bool { return d < 1 }) {
		return nil, fmt.Errorf("Build returned the sample shape %v", out)
	}
	c.x = e.Alloc(append([]int{batch}, in...)...)
	copy(compute.HostData(c.x), c.xs)
	c.dy = e.Alloc(append([]int{batch}, out...)...)
	c.rs = make([]float32, c.dy.Shape().Size())
	gradcheck.Fill(c.r, c.rs)
	return c, nil
}

// forward checks that Forward returns the shape Build promised, the same
// bits twice, and leaves its input alone: the finite differences rely on
// all three.
func (c *checker) forward() error {
	y := c.l.Forward(c.x)
	if !slices.Equal(y.Shape(), c.dy.Shape()) {
		return fmt.Errorf("Forward returned shape %v, want %v (Build returned %v)", y.Shape(), c.dy.Shape(), compute.Shape(c.dy.Shape()[1:]))
	}
	y0 := slices.Clone(compute.HostData(y))
	if !slices.Equal(compute.HostData(c.x), c.xs) {
		return errors.New("Forward changed its input")
	}
	if i := firstDiff(y0, compute.HostData(c.l.Forward(c.x))); i >= 0 {
		return fmt.Errorf("Forward is not deterministic: output[%d] differs between two calls on the same input", i)
	}
	return nil
}

// runBackward fills the gradient arena, runs Forward and Backward(R), and
// returns the input gradient (nil when there is none).
func (c *checker) runBackward(fill func([]float32)) []float32 {
	fill(c.a.grads)
	c.l.Forward(c.x)
	c.e.SetTensor(c.dy, c.rs)
	return compute.HostData(c.l.Backward(c.dy))
}

// backward runs Backward onto a gradient of zeros, keeps what it gives,
// and checks that it gives the same bits onto garbage: it overwrites.
func (c *checker) backward() {
	c.dx = slices.Clone(c.runBackward(func(v []float32) { clear(v) }))
	c.g = slices.Clone(c.a.grads)
	dx := c.runBackward(func(v []float32) { gradcheck.Fill(c.r, v) })
	for k, s := range c.specs {
		at := c.a.offsets[k]
		if i := firstDiff(c.g[at:at+s.Size()], c.a.grads[at:at+s.Size()]); i >= 0 {
			c.problems = append(c.problems, fmt.Sprintf("%s[%d]: Backward onto a gradient of garbage gave %g, onto zeros %g: it must overwrite the gradient, not add to it or leave it",
				s.Name, i, c.a.grads[at+i], c.g[at+i]))
		}
	}
	if i := firstDiff(c.dx, dx); !c.o.FirstLayer && i >= 0 {
		c.problems = append(c.problems, fmt.Sprintf("input[%d]: Backward is not deterministic: the input gradient differs between two calls", i))
	}
}

// gradients compares every parameter's gradient and the input's with
// central differences and returns how many elements it compared.
func (c *checker) gradients() int {
	tol := c.o.tolerance()
	f := func() float64 { return gradcheck.Dot(c.rs, compute.HostData(c.l.Forward(c.x))) }
	n := 0
	for k, s := range c.specs {
		at := c.a.offsets[k]
		c.problems = append(c.problems, gradcheck.Report(gradcheck.FD(s.Name, c.a.param[k], c.g[at:at+s.Size()], f, tol))...)
		n += s.Size()
	}
	if !c.o.FirstLayer {
		if len(c.dx) != len(c.xs) {
			c.problems = append(c.problems, fmt.Sprintf("input: Backward returned a gradient of %d values, want %d", len(c.dx), len(c.xs)))
			return n
		}
		c.problems = append(c.problems, gradcheck.Report(gradcheck.FD("input", compute.HostData(c.x), c.dx, f, tol))...)
		n += len(c.xs)
	}
	return n
}

// addGrads builds l again with every gradient marked AddGrads and checks
// that Backward adds what it gave onto zeros to what the gradient held. A
// layer whose Build refuses the marks (its parameters cannot be tied)
// passes.
func (c *checker) addGrads() {
	if len(c.specs) == 0 {
		return
	}
	b := c.b
	b.AddGrads = make([]bool, len(c.specs))
	for k := range b.AddGrads {
		b.AddGrads[k] = true
	}
	if _, err := c.l.Build(b); err != nil {
		return
	}
	held := make([]float32, len(c.a.grads))
	for i := range held {
		held[i] = float32(i%7) + 1
	}
	c.runBackward(func(v []float32) { copy(v, held) })
	tol := c.o.tolerance()
	for k, s := range c.specs {
		at := c.a.offsets[k]
		for i := range s.Size() {
			want := float64(held[at+i]) + float64(c.g[at+i])
			if got := float64(c.a.grads[at+i]); math.Abs(got-want) > tol.Atol+tol.Rtol*math.Abs(want) {
				c.problems = append(c.problems, fmt.Sprintf("%s[%d]: Backward built with AddGrads gave %.6g onto %g, want %.6g: it must add to the gradient",
					s.Name, i, got, held[at+i], want))
				break
			}
		}
	}
}
