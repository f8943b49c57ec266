package ddp

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// positionLM is a language model made of the CUDA engine's operations
// alone (it has no embedding gather): position p's logits are row p of a
// parameter W (T,V), the same for every window. The reported loss is the
// cross-entropy against the targets (the next token at every position);
// a second cross-entropy, against the input tokens themselves, goes into
// the gradient too, so the token ids the step reads move the parameters.
// A one-hot position matrix P (rows·T, T) spreads W over the batch:
// logits = P·W, and dW = Pᵀ·(dlogits of both losses).
type positionLM struct {
	T, V int
	e    compute.Engine
	w    compute.Tensor // (T,V), dw its gradient
	dw   compute.Tensor
	pos  compute.Tensor // (rows·T, T), one-hot
	// (rows·T, V) each: the logits, the targets' and the tokens' gradients
	logits, dTgt, dTok compute.Tensor
	aux                compute.Tensor // (3): the tokens' loss sums, unused
}

func (m *positionLM) Name() string { return "position-lm" }

func (m *positionLM) Params() []models.ParamSpec {
	return []models.ParamSpec{{Name: "w", Shape: []int{m.T, m.V}, Init: models.Normal, Std: 0.5}}
}

func (m *positionLM) Data() datasets.Spec {
	return datasets.Spec{Input: []int{m.T}, Tokens: true, Targets: m.T, Classes: m.V}
}

func (m *positionLM) Build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	m.e, m.w, m.dw = e, params[0], grads[0]
	n := rows * m.T
	m.pos = e.Alloc(n, m.T)
	onehot := make([]float32, n*m.T)
	for i := range n {
		onehot[i*m.T+i%m.T] = 1
	}
	e.SetTensor(m.pos, onehot)
	m.logits, m.dTgt, m.dTok = e.Alloc(n, m.V), e.Alloc(n, m.V), e.Alloc(n, m.V)
	m.aux = e.Alloc(3)
	return nil
}

func (m *positionLM) Forward(in models.Inputs, scale float32, stats compute.Tensor) {
	e := m.e
	e.Gemm(false, false, 1, m.pos, m.w, 0, m.logits)
	e.SoftmaxCrossEntropy(m.logits, in.Targets, m.dTgt, scale, stats)
	e.Zero(m.aux)
	e.SoftmaxCrossEntropy(m.logits, in.Tokens, m.dTok, scale, m.aux)
}

func (m *positionLM) Backward(ready func(int)) {
	m.e.Accumulate(m.dTgt, m.dTok)
	m.e.Gemm(true, false, 1, m.pos, m.dTgt, 0, m.dw)
	if ready != nil {
		ready(0)
	}
}

const lmT, lmV = 8, 16

// lmStream is n tokens below lmV that depend on their position in a
// window: the token at position p is 2p, 2p+1 or 2p+2 (mod lmV).
func lmStream(n, seed int) []byte {
	s := make([]byte, n)
	for i := range s {
		s[i] = byte((2*(i%lmT) + (i*i/lmT+seed)%3) % lmV)
	}
	return s
}

// lmData is 601 training windows (not a whole number of batches: the last
// batch of an epoch has padding rows, targets -1) and 40 test windows.
func lmData(t *testing.T) (train, test *datasets.TokenSource) {
	t.Helper()
	train, err := datasets.NewTokenSource([][]byte{lmStream(601*lmT+1, 0)}, lmT, lmV)
	if err != nil {
		t.Fatal(err)
	}
	test, err = datasets.NewTokenSource([][]byte{lmStream(40*lmT+1, 1)}, lmT, lmV)
	if err != nil {
		t.Fatal(err)
	}
	return train, test
}

// lmRun trains positionLM on train with b (with the replicated strategy
// when replicated is set) and returns the logs, the result, the parameters,
// the strategy and Fit's error.
func lmRun(t *testing.T, b backend, train datasets.Source, replicated bool) ([]float64, Result, []float32, string, error) {
	t.Helper()
	defer b.done()
	_, test := lmData(t)
	o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	opts := baseOptions()
	opts.LR = 0.5
	var losses []float64
	opts.Hooks.OnLog = func(li LogInfo) { losses = append(losses, li.Loss) }
	tr, err := New(b.c, b.e, &positionLM{T: lmT, V: lmV}, o, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if replicated {
		tr.strat = replicatedStrategy{}
	}
	res, err := tr.Fit(context.Background(), train, test)
	return losses, res, tr.Params(), tr.Strategy(), err
}

// A model that reads token ids and a target per position takes the device
// step path; with graphs and without, it gives the same bits as the
// replicated steps on the same (emulated) device, and the CPU's values up
// to float32 summation order.
func TestGPUPathTokens(t *testing.T) {
	train, _ := lmData(t)
	cl, cres, cp, cs, err := lmRun(t, cpuBackend(t), train, false)
	if err != nil || cs != "replicated" {
		t.Fatalf("CPU: %v (strategy %s)", err, cs)
	}
	rl, _, rp, _, err := lmRun(t, emulatedBackend(true), train, true)
	if err != nil {
		t.Fatalf("replicated steps on the device: %v", err)
	}
	for _, graphs := range []bool{true, false} {
		gl, gres, gp, gs, err := lmRun(t, emulatedBackend(graphs), train, false)
		if err != nil || gs != "device" {
			t.Fatalf("graphs %v: %v (strategy %s, want device)", graphs, err, gs)
		}
		if len(gl) != len(cl) || len(gl) != len(rl) || len(gl) < 5 || gres.Steps != cres.Steps {
			t.Fatalf("graphs %v: %d logs, %d on the CPU, %d replicated; steps %d and %d", graphs, len(gl), len(cl), len(rl), gres.Steps, cres.Steps)
		}
		for i := range gl {
			t.Logf("graphs %v, log %d: loss cpu %.7f  device %.7f  replicated %.7f", graphs, i, cl[i], gl[i], rl[i])
			if gl[i] != rl[i] {
				t.Errorf("graphs %v, log %d: loss %v on the device path, %v with replicated steps", graphs, i, gl[i], rl[i])
			}
			if math.Abs(gl[i]-cl[i]) > 1e-5*math.Max(1, math.Abs(cl[i])) {
				t.Errorf("graphs %v, log %d: loss %v on the device path, %v on the CPU", graphs, i, gl[i], cl[i])
			}
		}
		for i := range gp {
			if math.Float32bits(gp[i]) != math.Float32bits(rp[i]) {
				t.Fatalf("graphs %v, param %d: %v on the device path, %v with replicated steps", graphs, i, gp[i], rp[i])
			}
			if math.Abs(float64(gp[i]-cp[i])) > 1e-4 {
				t.Fatalf("graphs %v, param %d: %v on the device path, %v on the CPU", graphs, i, gp[i], cp[i])
			}
		}
		if math.Abs(gres.Test.Loss-cres.Test.Loss) > 1e-5 {
			t.Errorf("graphs %v: test loss %v, %v on the CPU", graphs, gres.Test.Loss, cres.Test.Loss)
		}
	}
	// The tokens matter: with every token id 0 the device path ends
	// elsewhere, so the comparisons above saw the slot's token ids.
	_, _, zp, _, err := lmRun(t, emulatedBackend(true), &corruptSource{TokenSource: train, zero: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := range zp {
		if zp[i] == rp[i] {
			same++
		}
	}
	if same == len(zp) {
		t.Error("the parameters do not depend on the token ids")
	}
}

// corruptSource writes value v into row 1 of every batch from its from-th
// GatherBatch on: a token (at position 2) or a target (position 3); or,
// with zero, sets every token id to 0.
type corruptSource struct {
	*datasets.TokenSource
	from, calls int
	token, zero bool
	v           int32
}

func (c *corruptSource) GatherBatch(idx []int, b datasets.Batch) {
	c.TokenSource.GatherBatch(idx, b)
	c.calls++
	switch {
	case c.zero:
		clear(b.Tokens[:len(idx)*lmT])
	case c.calls < c.from:
	case c.token:
		b.Tokens[lmT+2] = c.v
	default:
		b.Y[lmT+3] = c.v
	}
}

// A token id outside the vocabulary, or a target outside the classes, is
// an error naming the step, the sample and the position before the batch
// reaches the device, eager or replaying a graph; a target of -1 is not.
func TestGPUPathChecksTokens(t *testing.T) {
	train, _ := lmData(t)
	sm, err := datasets.NewShardSampler(train.Len(), baseOptions().GlobalBatch, 1, 0, baseOptions().Seed)
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]int, baseOptions().GlobalBatch)
	sample := func(s int) int { sm.Batch(0, s, idx); return idx[1] }
	for _, c := range []struct {
		name string
		src  *corruptSource
		want string
	}{
		{"token", &corruptSource{from: 1, token: true, v: lmV},
			fmt.Sprintf("step 1: sample %d has token 16 at position 2, outside the vocabulary of 16 tokens", sample(0))},
		{"negative token", &corruptSource{from: 1, token: true, v: -1},
			fmt.Sprintf("step 1: sample %d has token -1 at position 2, outside the vocabulary of 16 tokens", sample(0))},
		// steps 2 and 3 capture the slots' graphs, 4 and 5 replay them
		{"token while replaying", &corruptSource{from: 6, token: true, v: 99},
			fmt.Sprintf("step 6: sample %d has token 99 at position 2, outside the vocabulary of 16 tokens", sample(5))},
		{"target", &corruptSource{from: 1, v: lmV + 1},
			fmt.Sprintf("step 1: sample %d has target 17 at position 3, the model has 16 classes (or -1)", sample(0))},
		{"ignored target", &corruptSource{from: 1, v: -1}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.src.TokenSource = train
			_, res, _, s, err := lmRun(t, emulatedBackend(true), c.src, false)
			if s != "device" {
				t.Fatalf("strategy %s, want device", s)
			}
			if c.want == "" {
				if err != nil || res.Steps == 0 {
					t.Fatalf("Fit = %v after %d steps, want a finished run", err, res.Steps)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("Fit = %v, want %q", err, c.want)
			}
		})
	}
}
