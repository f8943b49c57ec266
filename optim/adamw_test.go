package optim

import (
	"math/rand/v2"
	"testing"
)

func TestAdamWHand(t *testing.T) {
	// Adam's moments with g unchanged (decoupled decay), and p first
	// multiplied by 1 − 0.1·0.1 = 0.99:
	// t1: p = 0.99 − 0.1·0.5/(0.5 + 1e-8) = 0.890000002.
	// t2: p = 0.890000002·0.99 − 0.0266337 = 0.8544663.
	// t3: p = 0.8544663·0.99 − 0.0658111 = 0.7801105.
	want := []float64{0.890000002, 0.854466298688, 0.780110476670}
	o, err := NewAdamW(AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	got := handRun(t, o)
	for i := range want {
		near(t, "p", got[i], want[i], 1e-6)
	}
}

// TestAdamWIsDecayedAdam checks that AdamW differs from Adam only by the
// decoupled decay: AdamW on p gives the same bits as Adam without weight
// decay on float32(p·Decay), step after step.
func TestAdamWIsDecayedAdam(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 257
	p := randomVec(rng, n, 1)
	const wd float32 = 0.05
	w, err := NewAdamW(AdamWConfig{Beta1: 0.85, Beta2: 0.995, Eps: 1e-6, WeightDecay: wd})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAdam(AdamConfig{Beta1: 0.85, Beta2: 0.995, Eps: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	rw, ra := newRun(w, p), newRun(a, p)
	for _, lr := range []float32{0.01, 0.03, 0.02, 0.005} {
		g := randomVec(rng, n, 0.1)
		decay := float32(1 - float64(lr)*float64(wd))
		for i := range ra.p {
			ra.p[i] = rw.p[i] * decay
		}
		rw.step(g, lr)
		ra.step(g, lr)
		sameBits(t, "params", rw.p, ra.p)
		sameBits(t, "exp_avg", rw.state[0], ra.state[0])
		sameBits(t, "exp_avg_sq", rw.state[1], ra.state[1])
	}
}

func TestAdamWZeroDecayIsAdam(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := randomVec(rng, 100, 1)
	w, _ := NewAdamW(AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	a, _ := NewAdam(DefaultAdamConfig())
	rw, ra := newRun(w, p), newRun(a, p)
	for range 3 {
		g := randomVec(rng, 100, 1)
		rw.step(g, 0.01)
		ra.step(g, 0.01)
	}
	sameBits(t, "params", rw.p, ra.p)
}

func TestAdamWDefaultsAndErrors(t *testing.T) {
	d := DefaultAdamWConfig()
	if d != (AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}) {
		t.Errorf("DefaultAdamWConfig() = %+v", d)
	}
	d.WeightDecay = -1
	_, err := NewAdamW(d)
	wantErr(t, err, "adamw", "weight decay")
	_, err = NewAdamW(AdamWConfig{Beta1: 0.9, Beta2: 1, Eps: 1e-8})
	wantErr(t, err, "adamw", "beta2", "[0, 1)")
}
