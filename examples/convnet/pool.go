package main

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// MaxPool2D is 2×2 max pooling with stride 2, as torch.nn.MaxPool2d(2): each
// output is the largest of a 2×2 window of its channel, and an odd last row
// or column is dropped. The gradient flows to the first largest element of
// each window. It has no parameters; its loops run over compute.HostData,
// so it runs on the CPU engine only.
type MaxPool2D struct {
	e                      compute.Engine
	batch, c, h, w, ho, wo int
	y, dx                  compute.Tensor // (B,C,Ho,Wo) and (B,C,H,W)
	arg                    []int32        // (B,C,Ho,Wo): index in x of each output's maximum
}

// NewMaxPool2D returns a 2×2 max-pooling layer.
func NewMaxPool2D() *MaxPool2D { return &MaxPool2D{} }

// Params is empty: pooling has no parameters.
func (l *MaxPool2D) Params() []models.ParamSpec { return nil }

// Build allocates y (B,C,H/2,W/2) and the argmax indices, and dx (B,C,H,W)
// unless this is the first layer. The input sample shape must be (C,H,W)
// with H and W at least 2.
func (l *MaxPool2D) Build(b models.Build) ([]int, error) {
	if len(b.In) != 3 || b.In[1] < 2 || b.In[2] < 2 {
		return nil, fmt.Errorf("maxpool: input samples of shape %v, want (C,H,W) with H, W >= 2", b.In)
	}
	if err := checkViews("maxpool", nil, b.Params, b.Grads); err != nil {
		return nil, err
	}
	if b.Batch <= 0 {
		return nil, fmt.Errorf("maxpool: batch %d", b.Batch)
	}
	l.e, l.batch = b.Engine, b.Batch
	l.c, l.h, l.w = b.In[0], b.In[1], b.In[2]
	l.ho, l.wo = l.h/2, l.w/2
	if n := l.batch * l.c * l.h * l.w; int64(n) > 1<<31-1 {
		return nil, fmt.Errorf("maxpool: %d input elements do not fit int32 indices", n)
	}
	l.y = l.e.Alloc(l.batch, l.c, l.ho, l.wo)
	l.arg = make([]int32, l.batch*l.c*l.ho*l.wo)
	l.dx = nil
	if b.NeedInputGrad {
		l.dx = l.e.Alloc(l.batch, l.c, l.h, l.w)
	}
	return []int{l.c, l.ho, l.wo}, nil
}

// Forward computes y (B,C,Ho,Wo), the maximum of each 2×2 window of x
// (B,C,H,W), and remembers where each maximum was.
func (l *MaxPool2D) Forward(x compute.Tensor) compute.Tensor {
	xs, y := hostData("maxpool", x), compute.HostData(l.y)
	o := 0
	for bc := 0; bc < l.batch*l.c; bc++ { // every (sample, channel) plane
		base := bc * l.h * l.w
		for i := 0; i < l.ho; i++ {
			for j := 0; j < l.wo; j++ {
				top := base + 2*i*l.w + 2*j
				best := top
				for _, at := range [3]int{top + 1, top + l.w, top + l.w + 1} {
					if xs[at] > xs[best] {
						best = at
					}
				}
				y[o], l.arg[o] = xs[best], int32(best)
				o++
			}
		}
	}
	return l.y
}

// Backward routes each element of dy (B,C,Ho,Wo) to the position of its
// window's maximum in dx (B,C,H,W); the other positions get 0. It returns
// nil for a first layer.
func (l *MaxPool2D) Backward(dy compute.Tensor) compute.Tensor {
	if l.dx == nil {
		return nil
	}
	g, dx := hostData("maxpool", dy), compute.HostData(l.dx)
	clear(dx)
	for o, at := range l.arg {
		dx[at] += g[o]
	}
	return l.dx
}
