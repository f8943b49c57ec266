package main

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// Padding is how a convolution treats the border of its input.
type Padding uint8

// Paddings. Valid uses only positions where the kernel fits inside the
// image, so the output is K-1 pixels smaller; Same pads the input with
// (K-1)/2 zeros on every side, so the output has the input's size (K odd).
const (
	Valid Padding = iota
	Same
)

// Conv2D is a two-dimensional convolution with stride 1, a bias per output
// channel and an optional fused activation, as torch.nn.Conv2d followed by
// the activation:
//
//	y[b,f,i,j] = act(bias[f] + Σ_c Σ_ki Σ_kj w[f,c,ki,kj] · x[b,c,i+ki-p,j+kj-p])
//
// with p the padding and x zero outside the image. It is computed as one
// GEMM over the whole micro-batch: im2col gathers every receptive field into
// a row of cols (B·Ho·Wo, C·K·K), the engine computes yt = cols·Wᵀ
// (B·Ho·Wo, F) and its fused bias and activation, and the result is
// transposed into the (B,F,Ho,Wo) layout the next layer reads.
//
// The GEMMs, the bias and the activation run on the engine; im2col, col2im
// and the transposes are host loops over compute.HostData, so the layer
// runs on the CPU engine only.
type Conv2D struct {
	// WeightInit initialises W: HeNormal when the layer ends in ReLU,
	// XavierUniform otherwise. Set it before the model's parameters are laid
	// out.
	WeightInit models.Init

	name                string
	inC, outC, k, pad   int
	act                 compute.Activation
	e                   compute.Engine
	batch, h, w, ho, wo int

	wt, b, dw, db compute.Tensor // W (F,C,K,K), bias (F) and their gradients
	addW, addB    bool           // Backward adds to dw, db (Build.AddGrads: a tied parameter)
	cols          compute.Tensor // (B·Ho·Wo, C·K·K) receptive fields of the last input
	yt            compute.Tensor // (B·Ho·Wo, F) output, one row per output position
	y             compute.Tensor // (B,F,Ho,Wo) output
	dyt           compute.Tensor // (B·Ho·Wo, F) output gradient, rows as in yt
	dcols         compute.Tensor // (B·Ho·Wo, C·K·K); nil for a first layer
	dx            compute.Tensor // (B,C,H,W); nil for a first layer
}

// NewConv2D returns a convolution from inC to outC channels with a k×k
// kernel, whose parameters are named name+".weight" (outC,inC,k,k) and
// name+".bias" (outC). Same padding needs an odd k.
func NewConv2D(name string, inC, outC, k int, pad Padding, act compute.Activation) *Conv2D {
	if inC <= 0 || outC <= 0 || k <= 0 {
		panic(fmt.Sprintf("convnet: NewConv2D(%q, %d, %d, %d): sizes must be positive", name, inC, outC, k))
	}
	p := 0
	if pad == Same {
		if k%2 == 0 {
			panic(fmt.Sprintf("convnet: NewConv2D(%q): same padding needs an odd kernel, got %d", name, k))
		}
		p = (k - 1) / 2
	}
	init := models.XavierUniform
	if act == compute.ReLU {
		init = models.HeNormal
	}
	return &Conv2D{WeightInit: init, name: name, inC: inC, outC: outC, k: k, pad: p, act: act}
}

// Params declares W (F,C,K,K) and b (F). The fans are those of
// torch.nn.init: C·K·K in, F·K·K out.
func (l *Conv2D) Params() []models.ParamSpec {
	fanIn, fanOut := l.inC*l.k*l.k, l.outC*l.k*l.k
	return []models.ParamSpec{
		{Name: l.name + ".weight", Shape: []int{l.outC, l.inC, l.k, l.k}, Init: l.WeightInit, FanIn: fanIn, FanOut: fanOut},
		{Name: l.name + ".bias", Shape: []int{l.outC}, Init: models.Zeros, FanIn: fanIn, FanOut: fanOut},
	}
}

// Build binds W, b and their gradients, allocates the activations for
// b.Batch rows and returns the output sample shape (F,Ho,Wo). The input
// sample shape must be (C,H,W).
func (l *Conv2D) Build(b models.Build) ([]int, error) {
	if len(b.In) != 3 || b.In[0] != l.inC {
		return nil, fmt.Errorf("%s: input samples of shape %v, want (%d,H,W)", l.name, b.In, l.inC)
	}
	if err := checkViews(l.name, l.Params(), b.Params, b.Grads); err != nil {
		return nil, err
	}
	l.h, l.w = b.In[1], b.In[2]
	l.ho, l.wo = l.h+2*l.pad-l.k+1, l.w+2*l.pad-l.k+1
	if l.ho < 1 || l.wo < 1 {
		return nil, fmt.Errorf("%s: a %dx%d kernel does not fit a %dx%d input", l.name, l.k, l.k, l.h, l.w)
	}
	if b.Batch <= 0 {
		return nil, fmt.Errorf("%s: batch %d", l.name, b.Batch)
	}
	e := b.Engine
	l.e, l.batch = e, b.Batch
	l.wt, l.b, l.dw, l.db = b.Params[0], b.Params[1], b.Grads[0], b.Grads[1]
	l.addW, l.addB = b.AddGrad(0), b.AddGrad(1)
	rows, ckk := b.Batch*l.ho*l.wo, l.inC*l.k*l.k
	l.cols = e.Alloc(rows, ckk)
	l.yt = e.Alloc(rows, l.outC)
	l.y = e.Alloc(b.Batch, l.outC, l.ho, l.wo)
	l.dyt = e.Alloc(rows, l.outC)
	l.dcols, l.dx = nil, nil
	if b.NeedInputGrad {
		l.dcols = e.Alloc(rows, ckk)
		l.dx = e.Alloc(b.Batch, l.inC, l.h, l.w)
	}
	return []int{l.outC, l.ho, l.wo}, nil
}

// Forward computes y (B,F,Ho,Wo) from x (B,C,H,W) and keeps the receptive
// fields of x for Backward.
func (l *Conv2D) Forward(x compute.Tensor) compute.Tensor {
	l.im2col(hostData(l.name, x))
	l.e.Gemm(false, true, 1, l.cols, l.wt, 0, l.yt) // yt (B·Ho·Wo, F) = cols (B·Ho·Wo, CKK) · Wᵀ (CKK, F)
	l.e.BiasAct(l.yt, l.b, l.act)
	// y[b,f,p] = yt[b·Ho·Wo+p, f]
	yt, y := compute.HostData(l.yt), compute.HostData(l.y)
	hw, f := l.ho*l.wo, l.outC
	for b := 0; b < l.batch; b++ {
		src, dst := yt[b*hw*f:(b+1)*hw*f], y[b*f*hw:(b+1)*f*hw]
		for p := 0; p < hw; p++ {
			for c := 0; c < f; c++ {
				dst[c*hw+p] = src[p*f+c]
			}
		}
	}
	return l.y
}

// Backward takes dy (B,F,Ho,Wo), writes dW (F,C,K,K) = dytᵀ·cols and
// db (F) = the sums of dy over batch and positions (after the activation's
// derivative), or adds them where Build marked AddGrads, and returns
// dx (B,C,H,W) = col2im(dyt·W), or nil for a first layer.
func (l *Conv2D) Backward(dy compute.Tensor) compute.Tensor {
	// dyt[b·Ho·Wo+p, f] = dy[b,f,p]
	src, dyt := hostData(l.name, dy), compute.HostData(l.dyt)
	hw, f := l.ho*l.wo, l.outC
	for b := 0; b < l.batch; b++ {
		s, d := src[b*f*hw:(b+1)*f*hw], dyt[b*hw*f:(b+1)*hw*f]
		for c := 0; c < f; c++ {
			for p := 0; p < hw; p++ {
				d[p*f+c] = s[c*hw+p]
			}
		}
	}
	l.e.BiasActBackward(l.dyt, l.yt, l.db, l.act, l.addB)
	var beta float32 // 0: overwrite dW; 1: add to it
	if l.addW {
		beta = 1
	}
	l.e.Gemm(true, false, 1, l.dyt, l.cols, beta, l.dw) // dW (F, CKK) = dytᵀ (F, B·Ho·Wo) · cols (B·Ho·Wo, CKK) (+ dW)
	if l.dx == nil {
		return nil
	}
	l.e.Gemm(false, false, 1, l.dyt, l.wt, 0, l.dcols) // dcols (B·Ho·Wo, CKK) = dyt (B·Ho·Wo, F) · W (F, CKK)
	l.col2im()
	return l.dx
}

// im2col fills cols (B·Ho·Wo, C·K·K) from x (B,C,H,W): row b·Ho·Wo+i·Wo+j
// holds the receptive field of output (i,j) of sample b, in W's (C,K,K)
// order, with zeros where it reaches past the border.
func (l *Conv2D) im2col(x []float32) {
	cols := compute.HostData(l.cols)
	k, ckk, chw, hw := l.k, l.inC*l.k*l.k, l.inC*l.h*l.w, l.h*l.w
	for b := 0; b < l.batch; b++ {
		xb := x[b*chw : (b+1)*chw]
		for i := 0; i < l.ho; i++ {
			for j := 0; j < l.wo; j++ {
				row := cols[((b*l.ho+i)*l.wo+j)*ckk:][:ckk]
				n := 0
				for c := 0; c < l.inC; c++ {
					xc := xb[c*hw : (c+1)*hw]
					for ki := 0; ki < k; ki++ {
						iy := i + ki - l.pad
						for kj := 0; kj < k; kj++ {
							ix := j + kj - l.pad
							if iy >= 0 && iy < l.h && ix >= 0 && ix < l.w {
								row[n] = xc[iy*l.w+ix]
							} else {
								row[n] = 0
							}
							n++
						}
					}
				}
			}
		}
	}
}

// col2im sums dcols (B·Ho·Wo, C·K·K) back into dx (B,C,H,W): the adjoint
// of im2col.
func (l *Conv2D) col2im() {
	dcols, dx := compute.HostData(l.dcols), compute.HostData(l.dx)
	clear(dx)
	k, ckk, chw, hw := l.k, l.inC*l.k*l.k, l.inC*l.h*l.w, l.h*l.w
	for b := 0; b < l.batch; b++ {
		db := dx[b*chw : (b+1)*chw]
		for i := 0; i < l.ho; i++ {
			for j := 0; j < l.wo; j++ {
				row := dcols[((b*l.ho+i)*l.wo+j)*ckk:][:ckk]
				n := 0
				for c := 0; c < l.inC; c++ {
					dc := db[c*hw : (c+1)*hw]
					for ki := 0; ki < k; ki++ {
						iy := i + ki - l.pad
						for kj := 0; kj < k; kj++ {
							ix := j + kj - l.pad
							if iy >= 0 && iy < l.h && ix >= 0 && ix < l.w {
								dc[iy*l.w+ix] += row[n]
							}
							n++
						}
					}
				}
			}
		}
	}
}

// hostData is compute.HostData, or a panic naming the layer when t lives on
// a device: these layers loop over host memory.
func hostData(layer string, t compute.Tensor) []float32 {
	d := compute.HostData(t)
	if d == nil {
		panic(fmt.Sprintf("convnet: %s runs on the CPU engine only; got a %T", layer, t))
	}
	return d
}

// checkViews verifies that a layer got one parameter and one gradient view
// of the declared size per ParamSpec.
func checkViews(layer string, specs []models.ParamSpec, params, grads []compute.Tensor) error {
	if len(params) != len(specs) || len(grads) != len(specs) {
		return fmt.Errorf("%s: got %d parameter and %d gradient views, want %d of each",
			layer, len(params), len(grads), len(specs))
	}
	for i, s := range specs {
		for _, v := range []compute.Tensor{params[i], grads[i]} {
			if v == nil || v.Size() != s.Size() {
				return fmt.Errorf("%s: view of %s does not have the %d elements of shape %v", layer, s.Name, s.Size(), s.Shape)
			}
		}
	}
	return nil
}
