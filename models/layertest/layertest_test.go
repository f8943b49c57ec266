package layertest_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/models/layertest"
)

func engine(t testing.TB) compute.Engine {
	e, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// bug is what a linear layer gets wrong.
type bug int

const (
	none             bug = iota
	scalesWeightGrad     // dW 1% too large
	addsToGrads          // dW and db added to what the gradient held
	leavesBiasGrad       // db never written
	wrongInputGrad       // dx from Wᵀ's neighbour row
	ignoresAddGrads      // overwrites gradients marked AddGrads
	restlessForward      // the output drifts call by call
	wrongShape           // Build returns one feature too many
)

// linear is y = x·Wᵀ + b written with host loops, as a user writes a layer,
// with a bug or none.
type linear struct {
	in, out      int
	bug          bug
	add          [2]bool
	batch        int
	w, b, dw, db []float32
	x, y, dx     compute.Tensor
	need         bool
	forwardCalls int
}

func newLinear(in, out int, b bug) *linear {
	return &linear{in: in, out: out, bug: b}
}

func (l *linear) Params() []models.ParamSpec {
	return []models.ParamSpec{
		{Name: "bad.weight", Shape: []int{l.out, l.in}},
		{Name: "bad.bias", Shape: []int{l.out}},
	}
}

func (l *linear) Build(b models.Build) ([]int, error) {
	if len(b.In) != 1 || b.In[0] != l.in {
		return nil, fmt.Errorf("input %v, want [%d]", b.In, l.in)
	}
	l.batch, l.need = b.Batch, b.NeedInputGrad
	l.w, l.b = compute.HostData(b.Params[0]), compute.HostData(b.Params[1])
	l.dw, l.db = compute.HostData(b.Grads[0]), compute.HostData(b.Grads[1])
	l.add = [2]bool{b.AddGrad(0), b.AddGrad(1)}
	l.y, l.dx = b.Engine.Alloc(b.Batch, l.out), b.Engine.Alloc(b.Batch, l.in)
	if l.bug == wrongShape {
		return []int{l.out + 1}, nil
	}
	return []int{l.out}, nil
}

func (l *linear) Forward(x compute.Tensor) compute.Tensor {
	l.x = x
	xs, y := compute.HostData(x), compute.HostData(l.y)
	l.forwardCalls++
	for r := range l.batch {
		for o := range l.out {
			s := l.b[o]
			for i := range l.in {
				s += xs[r*l.in+i] * l.w[o*l.in+i]
			}
			if l.bug == restlessForward {
				s += float32(l.forwardCalls) * 1e-6
			}
			y[r*l.out+o] = s
		}
	}
	return l.y
}

func (l *linear) Backward(dyT compute.Tensor) compute.Tensor {
	xs, dy, dx := compute.HostData(l.x), compute.HostData(dyT), compute.HostData(l.dx)
	addW := l.add[0] && l.bug != ignoresAddGrads || l.bug == addsToGrads
	addB := l.add[1] && l.bug != ignoresAddGrads || l.bug == addsToGrads
	for o := range l.out {
		for i := range l.in {
			var s float32
			for r := range l.batch {
				s += dy[r*l.out+o] * xs[r*l.in+i]
			}
			if l.bug == scalesWeightGrad {
				s *= 1.01
			}
			if addW {
				s += l.dw[o*l.in+i]
			}
			l.dw[o*l.in+i] = s
		}
		var s float32
		for r := range l.batch {
			s += dy[r*l.out+o]
		}
		if addB {
			s += l.db[o]
		}
		if l.bug != leavesBiasGrad {
			l.db[o] = s
		}
	}
	if !l.need {
		return nil
	}
	for r := range l.batch {
		for i := range l.in {
			var s float32
			for o := range l.out {
				row := o
				if l.bug == wrongInputGrad {
					row = (o + 1) % l.out
				}
				s += dy[r*l.out+o] * l.w[row*l.in+i]
			}
			dx[r*l.in+i] = s
		}
	}
	return l.dx
}

// Each bug is caught, by a message that names the parameter (or the input)
// and what is wrong; the layer without a bug passes, so the messages are
// the bugs'.
func TestCheckCatchesBrokenLayers(t *testing.T) {
	e := engine(t)
	for _, tc := range []struct {
		bug  bug
		want []string
	}{
		{none, nil},
		{scalesWeightGrad, []string{"bad.weight[0]: analytic", "finite difference", "bad.weight: "}},
		{addsToGrads, []string{"bad.weight[0]: Backward onto a gradient of garbage", "bad.bias[0]: Backward onto", "must overwrite"}},
		{leavesBiasGrad, []string{"bad.bias[0]: Backward onto", "bad.bias[0]: analytic 0,"}},
		{wrongInputGrad, []string{"input[0]: analytic"}},
		{ignoresAddGrads, []string{"bad.weight[0]: Backward built with AddGrads", "bad.bias[0]: Backward built with AddGrads", "must add"}},
		{restlessForward, []string{"Forward is not deterministic: output[0]"}},
		{wrongShape, []string{"Forward returned shape (3, 4), want (3, 5) (Build returned (5))"}},
	} {
		n, err := layertest.Check(e, newLinear(6, 4, tc.bug), 3, []int{6}, layertest.Options{})
		if tc.want == nil {
			if err != nil || n != 4*6+4+3*6 {
				t.Errorf("bug %d: checked %d, %v; want %d and no error", tc.bug, n, err, 4*6+4+3*6)
			}
			continue
		}
		if err == nil {
			t.Errorf("bug %d: not caught", tc.bug)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("bug %d: %v\nwant it to say %q", tc.bug, err, w)
			}
		}
		if tc.bug != wrongInputGrad && strings.Contains(err.Error(), "input[") {
			t.Errorf("bug %d: the input gradient blamed: %v", tc.bug, err)
		}
	}
}

// The input gradient of a first layer is neither needed nor checked.
func TestCheckFirstLayer(t *testing.T) {
	n, err := layertest.Check(engine(t), newLinear(6, 4, wrongInputGrad), 3, []int{6}, layertest.Options{FirstLayer: true})
	if err != nil || n != 4*6+4 {
		t.Errorf("checked %d, %v; want %d and no error", n, err, 4*6+4)
	}
}

// A ReLU layer is checked away from its kink: Accept refuses draws with an
// input within 3 Eps of zero, here every draw, and Check says so.
func TestCheckAccept(t *testing.T) {
	e := engine(t)
	calls := 0
	_, err := layertest.Check(e, models.NewReLU(), 2, []int{3}, layertest.Options{Accept: func([][]float32, []float32) bool {
		calls++
		return false
	}})
	if err == nil || !strings.Contains(err.Error(), "Accept refused 1000 draws") || calls != 1000 {
		t.Errorf("after %d draws: %v", calls, err)
	}
	n, err := layertest.Check(e, models.NewReLU(), 2, []int{3}, layertest.Options{Accept: func(_ [][]float32, x []float32) bool {
		for _, v := range x {
			if math.Abs(float64(v)) < 3*layertest.DefaultEps {
				return false
			}
		}
		return true
	}})
	if err != nil || n != 6 {
		t.Errorf("checked %d, %v; want 6 and no error", n, err)
	}
}

func TestCheckRefusesWhatItCannotCheck(t *testing.T) {
	e := engine(t)
	for _, tc := range []struct {
		l     models.Layer
		batch int
		in    []int
		o     layertest.Options
		want  string
	}{
		{models.NewReLU(), 2, []int{3}, layertest.Options{FirstLayer: true}, "nothing to check"},
		{models.NewReLU(), 0, []int{3}, layertest.Options{}, "want positive sizes"},
		{newLinear(6, 4, none), 2, []int{5}, layertest.Options{}, "Build: input [5], want [6]"},
	} {
		if _, err := layertest.Check(e, tc.l, tc.batch, tc.in, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%T, %d, %v) = %v, want an error saying %q", tc.l, tc.batch, tc.in, err, tc.want)
		}
	}
}
