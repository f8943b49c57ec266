package optim

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchSizes are the arena sizes of the benchmarks, by name.
var benchSizes = []struct {
	name string
	n    int
}{{"1M", 1 << 20}, {"16M", 1 << 24}}

// BenchmarkUpdate times one update over the whole arena and reports the
// memory traffic it needs: params and state read and written, grads read.
func BenchmarkUpdate(b *testing.B) {
	cases := []struct {
		name string
		h    Hyper
	}{
		{"sgd", Hyper{Kind: "sgd"}},
		{"sgd-wd", Hyper{Kind: "sgd", Config: Config{WeightDecay: 1e-4}}},
		{"sgd-momentum", Hyper{Kind: "sgd", Config: Config{Momentum: 0.9}}},
		{"sgd-nesterov-wd", Hyper{Kind: "sgd", Config: Config{Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4}}},
		{"adam", Hyper{Kind: "adam", Config: Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}}},
		{"adam-wd", Hyper{Kind: "adam", Config: Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4}}},
		{"adamw", Hyper{Kind: "adamw", Config: Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}}},
	}
	for _, c := range cases {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%s", c.name, size.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				o := build(b, c.h)
				r := newRun(o, randomVec(rng, size.n, 1))
				g := randomVec(rng, size.n, 1)
				r.step(g, 1e-3) // step 1 (which clears Adam's state) untimed
				bytes := int64(size.n) * 4 * int64(3+2*o.Slots())
				b.SetBytes(bytes)
				for b.Loop() {
					r.step(g, 1e-3)
				}
				b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkGlobalNorm times the norm pass of clipping (grads read once).
func BenchmarkGlobalNorm(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("n="+size.name, func(b *testing.B) {
			g := randomVec(rand.New(rand.NewPCG(2, 2)), size.n, 1)
			bytes := int64(size.n) * 4
			b.SetBytes(bytes)
			var sink float64
			for b.Loop() {
				sink += GlobalNorm(g)
			}
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			_ = sink
		})
	}
}

// benchOne is a factor of 1 the compiler cannot see: Scale(g, 1) inlined
// would fold x·1 away and time nothing.
var benchOne float32 = 1

// BenchmarkScale times the scale pass of clipping (grads read and written).
func BenchmarkScale(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("n="+size.name, func(b *testing.B) {
			g := randomVec(rand.New(rand.NewPCG(3, 3)), size.n, 1)
			bytes := int64(size.n) * 8
			b.SetBytes(bytes)
			for b.Loop() {
				Scale(g, benchOne)
			}
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
