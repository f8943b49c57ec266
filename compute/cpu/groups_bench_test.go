package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
)

// The transformer groups' benchmarks, one thread, on OpenBLAS where it
// loads (gonum otherwise), at two sizes: gpt-tiny per PE (B=8, T=128,
// C=128, 4 heads, MLP width 4C) and one GPT-2 small block (B=1, T=1024,
// C=768, 12 heads). Loop throughput is in GB/s (bytes read and written
// once), GEMMs and attention in GFLOP/s (attention: the causal flops only,
// 2·hs·T(T+1)/2 per head and product). SYMDDP_VEC=go runs the Go loops.

type benchSize struct {
	name          string
	b, t, c, head int
}

var benchSizes = []benchSize{{"tiny", 8, 128, 128, 4}, {"gpt2", 1, 1024, 768, 12}}

func benchEngine(b *testing.B) *Engine {
	e, err := New(Options{BLAS: blas.Auto, Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func randTensor(e *Engine, r *rand.Rand, shape ...int) compute.Tensor {
	t := e.Alloc(shape...)
	d := data("bench", t)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return t
}

func gflops(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkLayerNorm(b *testing.B) {
	e := benchEngine(b)
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range benchSizes {
		rows, c := s.b*s.t, s.c
		x, dy := randTensor(e, r, rows, c), randTensor(e, r, rows, c)
		w, bias := randTensor(e, r, c), randTensor(e, r, c)
		y, dx, dw, db := e.Alloc(rows, c), e.Alloc(rows, c), e.Alloc(c), e.Alloc(c)
		mean, rstd := e.Alloc(rows), e.Alloc(rows)
		b.Run(fmt.Sprintf("%s/fwd/%dx%d", s.name, rows, c), func(b *testing.B) {
			b.SetBytes(int64(4 * 2 * rows * c))
			for b.Loop() {
				e.LayerNorm(y, mean, rstd, x, w, bias, 1e-5)
			}
		})
		b.Run(fmt.Sprintf("%s/bwd/%dx%d", s.name, rows, c), func(b *testing.B) {
			b.SetBytes(int64(4 * 4 * rows * c)) // dy, x, dx read, dx written
			for b.Loop() {
				e.LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, true)
			}
		})
	}
}

func BenchmarkGELU(b *testing.B) {
	e := benchEngine(b)
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range benchSizes {
		rows, c := s.b*s.t, 4*s.c
		x, dy, y := randTensor(e, r, rows, c), randTensor(e, r, rows, c), e.Alloc(rows, c)
		b.Run(fmt.Sprintf("%s/fwd/%dx%d", s.name, rows, c), func(b *testing.B) {
			b.SetBytes(int64(4 * 2 * rows * c))
			for b.Loop() {
				e.GELU(y, x)
			}
		})
		b.Run(fmt.Sprintf("%s/bwd/%dx%d", s.name, rows, c), func(b *testing.B) {
			b.SetBytes(int64(4 * 3 * rows * c))
			for b.Loop() {
				e.GELUBackward(y, dy, x)
			}
		})
	}
}

func BenchmarkIndexing(b *testing.B) {
	e := benchEngine(b)
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range benchSizes {
		const vocab = 4096
		n, c := s.b*s.t, s.c
		table, rows := randTensor(e, r, vocab, c), e.Alloc(n, c)
		idx := e.AllocLabels(n)
		for i := range idx.(*Labels).v {
			idx.(*Labels).v[i] = int32(r.IntN(vocab))
		}
		for _, v := range []struct {
			name string
			f    func()
		}{
			{"gather", func() { e.GatherRows(rows, table, idx, false) }},
			{"gatheradd", func() { e.GatherRows(rows, table, idx, true) }},
			{"scatteradd", func() { e.ScatterAddRows(table, rows, idx) }},
		} {
			b.Run(fmt.Sprintf("%s/%s/%dx%d", s.name, v.name, n, c), func(b *testing.B) {
				b.SetBytes(int64(4 * 2 * n * c))
				for b.Loop() {
					v.f()
				}
			})
		}
	}
}

func BenchmarkGemmBatched(b *testing.B) {
	e := benchEngine(b)
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range benchSizes {
		// One score product per sequence and head: (T,hs)·(T,hs)ᵀ.
		batch, hs := s.b*s.head, s.c/s.head
		q, k, att := randTensor(e, r, batch, s.t, hs), randTensor(e, r, batch, s.t, hs), e.Alloc(batch, s.t, s.t)
		b.Run(fmt.Sprintf("%s/%dx%dx%dx%d", s.name, batch, s.t, s.t, hs), func(b *testing.B) {
			for b.Loop() {
				e.GemmBatched(false, true, 1, q, k, 0, att)
			}
			gflops(b, 2*float64(batch*s.t*s.t*hs))
		})
	}
}

func BenchmarkAttention(b *testing.B) {
	e := benchEngine(b)
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range benchSizes {
		spec := compute.AttentionSpec{B: s.b, T: s.t, C: s.c, Heads: s.head}
		p, err := e.CausalAttention(spec)
		if err != nil {
			b.Fatal(err)
		}
		qkv, dout := randTensor(e, r, s.b, s.t, 3*s.c), randTensor(e, r, s.b, s.t, s.c)
		out, dqkv := e.Alloc(s.b, s.t, s.c), e.Alloc(s.b, s.t, 3*s.c)
		// One causal product: 2·hs flops for each of T(T+1)/2 pairs, per head.
		product := float64(s.b*s.c) * float64(s.t*(s.t+1))
		name := fmt.Sprintf("%s/B%d_T%d_C%d_H%d", s.name, s.b, s.t, s.c, s.head)
		b.Run(name+"/fwd", func(b *testing.B) {
			for b.Loop() {
				p.Forward(out, qkv)
			}
			gflops(b, 2*product)
		})
		b.Run(name+"/bwd", func(b *testing.B) {
			p.Forward(out, qkv)
			for b.Loop() {
				p.Backward(dqkv, dout, qkv)
			}
			gflops(b, 4*product)
		})
	}
}
