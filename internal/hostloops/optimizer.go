package hostloops

import "math"

// The optimizers' fused updates over flat slices of parameters, gradients
// and state: SGD (momentum, Nesterov, weight decay), Adam and AdamW. The C
// loops are in optimizer.h.

// SGD is plain SGD: g' = g + wd·p (wd ≠ 0), p -= lr·g'.
func SGD(p, g []float32, lr, wd float32) {
	n := len(p)
	atLeast("SGD", n, len(g))
	if !useC || n < minC {
		goSGD(p, g[:n], lr, wd)
		return
	}
	cSGD(p, g, lr, wd)
}

// SGDMomentum is SGD with momentum buffer buf: g' = g + wd·p (wd ≠ 0);
// buf = g' on the first step, mu·buf + g' after; the step is buf, or
// g' + mu·buf with nesterov; p -= lr·step.
func SGDMomentum(p, g, buf []float32, lr, wd, mu float32, nesterov, first bool) {
	n := len(p)
	atLeast("SGDMomentum", n, len(g), len(buf))
	if !useC || n < minC {
		goSGDMomentum(p, g[:n], buf[:n], lr, wd, mu, nesterov, first)
		return
	}
	cSGDMomentum(p, g, buf, lr, wd, mu, nesterov, first)
}

// AdamArgs are the scalars of one Adam or AdamW step.
type AdamArgs struct {
	Decay    float32 // AdamW's decoupled factor on p (1 for Adam: p·1 = p exactly)
	L2       float32 // Adam's L2 weight decay added to g (0 for AdamW)
	Beta1    float32
	Beta2    float32
	C1       float32 // 1 - Beta1
	C2       float32 // 1 - Beta2
	Eps      float32
	StepSize float32 // lr / (1 - Beta1^t)
	BC2Sqrt  float32 // sqrt(1 - Beta2^t)
}

// Adam is one step of Adam or AdamW over p with gradients g and moments m,
// v: p' = p·Decay; g' = g + L2·p' (L2 ≠ 0); m = β1·m + c1·g';
// v = β2·v + (c2·g')·g'; p = p' − (StepSize·m) / (sqrt(v)/BC2Sqrt + Eps).
func Adam(p, g, m, v []float32, a *AdamArgs) {
	n := len(p)
	atLeast("Adam", n, len(g), len(m), len(v))
	if !useC || n < minC {
		goAdam(p, g[:n], m[:n], v[:n], a)
		return
	}
	cAdam(p, g, m, v, a)
}

// The Go loops: the reference for the C ones, and what runs without cgo.
// Every explicit float32 conversion rounds, so the compiler may not fuse a
// multiply into the following add.

func goSGD(p, g []float32, lr, wd float32) {
	g = g[:len(p)]
	for i, pi := range p {
		gi := g[i]
		if wd != 0 {
			gi += float32(wd * pi)
		}
		p[i] = pi - float32(lr*gi)
	}
}

func goSGDMomentum(p, g, buf []float32, lr, wd, mu float32, nesterov, first bool) {
	g, buf = g[:len(p)], buf[:len(p)]
	for i, pi := range p {
		gi := g[i]
		if wd != 0 {
			gi += float32(wd * pi)
		}
		b := gi
		if !first {
			b = float32(mu*buf[i]) + gi
		}
		buf[i] = b
		d := b
		if nesterov {
			d = gi + float32(mu*b)
		}
		p[i] = pi - float32(lr*d)
	}
}

func goAdam(p, g, m, v []float32, a *AdamArgs) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	b1, b2, c1, c2, eps := a.Beta1, a.Beta2, a.C1, a.C2, a.Eps
	decay, l2, stepSize, bc2 := a.Decay, a.L2, a.StepSize, a.BC2Sqrt
	for i, pi := range p {
		pi = float32(pi * decay)
		gi := g[i]
		if l2 != 0 {
			gi += float32(l2 * pi)
		}
		mi := float32(b1*m[i]) + float32(c1*gi)
		vi := float32(b2*v[i]) + float32(float32(c2*gi)*gi)
		m[i], v[i] = mi, vi
		den := float32(math.Sqrt(float64(vi)))/bc2 + eps
		p[i] = pi - float32(stepSize*mi)/den
	}
}
