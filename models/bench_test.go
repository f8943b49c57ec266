package models_test

import (
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// BenchmarkMLPStep measures one training step of the default mlp
// (784-256-256-10) on one thread: forward, softmax cross-entropy, backward
// and a plain SGD update (optim.SGD) over the flat parameter arena. Run it
// with -cpu 1 to keep the Go runtime on one core too.
func BenchmarkMLPStep(b *testing.B) {
	for _, k := range []blas.Kind{blas.OpenBLAS, blas.Gonum} {
		b.Run(string(k)+"/batch256", func(b *testing.B) { benchStep(b, k, 256) })
	}
}

func benchStep(b *testing.B, kind blas.Kind, batch int) {
	e, err := cpu.New(cpu.Options{BLAS: kind, Threads: 1})
	if err != nil {
		b.Skip(err)
	}
	mm, err := models.New("mlp", models.Config{})
	if err != nil {
		b.Fatal(err)
	}
	m := mm.(*models.Classifier).Network()
	specs := m.Params()
	offsets, total := models.Layout(specs)
	params, grads := make([]float32, total), make([]float32, total)
	dst := make([][]float32, len(specs))
	var pv, gv []compute.Tensor
	for i, s := range specs {
		dst[i] = params[offsets[i] : offsets[i]+s.Size()]
		pv = append(pv, e.View(compute.HostArena(params), offsets[i], s.Shape...))
		gv = append(gv, e.View(compute.HostArena(grads), offsets[i], s.Shape...))
	}
	models.InitParams(specs, 1, dst)
	if err := m.Build(e, pv, gv, batch); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := e.Alloc(batch, 784)
	for i, xs := 0, compute.HostData(x); i < len(xs); i++ {
		xs[i] = float32(r.Float64())
	}
	labels := e.AllocLabels(batch)
	host := make([]int32, batch)
	for i := range host {
		host[i] = int32(r.IntN(10))
	}
	e.SetLabels(labels, host)
	loss := models.NewCrossEntropy(e, batch, 10)
	sgd, err := optim.NewSGD(optim.SGDConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Backward(loss.Apply(m.Forward(x), labels, 1/float32(batch)), nil)
		sgd.Update(params, grads, nil, i+1, 0.01)
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "samples/s")
}
