package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/symddp/symddp/datasets"
)

// loadRings is the "rings" dataset: points in the plane on concentric
// rings, one class per ring (radius 1, 2, ..., with Gaussian noise), 8192
// training and 1024 test points. It is made from the run's seed, so every
// PE holds the same points. --data-opt rings=N sets the number of rings
// (default 3), noise=F the noise (default 0.15).
func loadRings(cfg datasets.LoadConfig) (train, test datasets.Source, err error) {
	rings, noise := 3, 0.15
	for k, v := range cfg.Options {
		switch k {
		case "rings":
			if rings, err = strconv.Atoi(v); err != nil || rings < 2 {
				return nil, nil, fmt.Errorf("--data-opt rings=%s: want an integer of at least 2", v)
			}
		case "noise":
			if noise, err = strconv.ParseFloat(v, 64); err != nil || !(noise >= 0) {
				return nil, nil, fmt.Errorf("--data-opt noise=%s: want a standard deviation >= 0", v)
			}
		default:
			return nil, nil, fmt.Errorf("--data-opt %s: rings takes rings and noise", k)
		}
	}
	if cfg.Dir != "" {
		return nil, nil, fmt.Errorf("rings makes its points: --data-dir %s is not used", cfg.Dir)
	}
	tr, err := ringPoints(8192, rings, noise, cfg.Seed)
	if err != nil {
		return nil, nil, err
	}
	te, err := ringPoints(1024, rings, noise, cfg.Seed+1)
	if err != nil {
		return nil, nil, err
	}
	return tr, te, nil
}

// ringPoints draws n points, point i on ring i mod rings.
func ringPoints(n, rings int, noise float64, seed uint64) (*datasets.InMemory, error) {
	x, y := make([]float32, 2*n), make([]int32, n)
	r := rand.New(rand.NewPCG(seed, 0x72696e6773))
	for i := range n {
		k := i % rings
		theta := 2 * math.Pi * r.Float64()
		rad := float64(k+1) + noise*r.NormFloat64()
		x[2*i], x[2*i+1], y[i] = float32(rad*math.Cos(theta)/float64(rings)), float32(rad*math.Sin(theta)/float64(rings)), int32(k)
	}
	return datasets.NewInMemory(x, y, []int{2}, rings)
}
