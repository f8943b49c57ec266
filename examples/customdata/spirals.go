package main

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Spirals is a custom dataset: points in the plane on interleaved spiral
// arms, one class per arm, held in memory. It implements datasets.Dataset
// by hand (Len, SampleShape, Classes, Gather), which is all a dataset needs
// to be trained on by ddp; datasets.NewInMemory would do for data that is
// already in two flat slices.
//
// Arm k of K is the curve r(t) = t, θ(t) = 2π·turns·t + 2πk/K for t in
// [0.1, 1], and a point is drawn at a uniform t with Gaussian noise of
// standard deviation noise added to each coordinate. No line separates two
// arms, so a linear model stays near chance while an MLP learns them.
type Spirals struct {
	x       []float32 // (N,2): the points, x then y
	y       []int32   // (N): the arms
	classes int
}

// spiralTurns is how many times an arm winds around the origin.
const spiralTurns = 1.75

// NewSpirals returns n points on arms spiral arms. Point i is on arm i mod
// arms; where on the arm and its noise come from (seed, i) alone, so every
// PE that calls NewSpirals with the same arguments holds the same data.
func NewSpirals(n, arms int, noise float64, seed uint64) (*Spirals, error) {
	switch {
	case n <= 0:
		return nil, fmt.Errorf("spirals: %d points: need at least one", n)
	case arms < 2:
		return nil, fmt.Errorf("spirals: %d arms: need at least two", arms)
	case !(noise >= 0):
		return nil, fmt.Errorf("spirals: noise %v: want a standard deviation >= 0", noise)
	}
	s := &Spirals{x: make([]float32, 2*n), y: make([]int32, n), classes: arms}
	for i := range n {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		k := i % arms
		t := 0.1 + 0.9*r.Float64()
		theta := 2*math.Pi*spiralTurns*t + 2*math.Pi*float64(k)/float64(arms)
		s.x[2*i] = float32(t*math.Cos(theta) + noise*r.NormFloat64())
		s.x[2*i+1] = float32(t*math.Sin(theta) + noise*r.NormFloat64())
		s.y[i] = int32(k)
	}
	return s, nil
}

// Len is the number of points.
func (s *Spirals) Len() int { return len(s.y) }

// SampleShape is [2]: a point's two coordinates.
func (s *Spirals) SampleShape() []int { return []int{2} }

// Classes is the number of arms.
func (s *Spirals) Classes() int { return s.classes }

// Gather copies points idx[i] into x[2i], x[2i+1] and their arms into y[i].
// An index of -1 is a padding row: zero coordinates and label -1. It does
// not allocate, as the trainer calls it every step.
//
//	x is (len(idx), 2), y is (len(idx))
func (s *Spirals) Gather(idx []int, x []float32, y []int32) {
	for i, j := range idx {
		if j == -1 {
			x[2*i], x[2*i+1], y[i] = 0, 0, -1
			continue
		}
		x[2*i], x[2*i+1], y[i] = s.x[2*j], s.x[2*j+1], s.y[j]
	}
}
