package models

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// Layout places parameters back to back in spec order, as the trainer lays
// out its arenas: parameter i occupies [offsets[i], offsets[i]+specs[i].Size())
// of an arena of total elements.
func Layout(specs []ParamSpec) (offsets []int, total int) {
	offsets = make([]int, len(specs))
	for i, s := range specs {
		offsets[i] = total
		total += s.Size()
	}
	return offsets, total
}

// InitArena returns a whole parameter arena laid out by Layout, every
// parameter initialised by InitParams from seed.
func InitArena(specs []ParamSpec, seed uint64) []float32 {
	offsets, n := Layout(specs)
	arena := make([]float32, n)
	dst := make([][]float32, len(specs))
	for i, s := range specs {
		dst[i] = arena[offsets[i] : offsets[i]+s.Size()]
	}
	InitParams(specs, seed, dst)
	return arena
}

// InitParams fills dst[i], one slice per parameter (views of an arena laid
// out by Layout, typically), with the initial values of parameter i: zeros,
// or He or Xavier draws scaled by the fans,
//
//	HeNormal       N(0, 2/FanIn)
//	HeUniform      U(-sqrt(6/FanIn), +sqrt(6/FanIn))
//	XavierNormal   N(0, 2/(FanIn+FanOut))
//	XavierUniform  U(-sqrt(6/(FanIn+FanOut)), +sqrt(6/(FanIn+FanOut)))
//	Normal         N(0, Std²)
//	Ones           1
//
// The values depend only on the seed and each parameter's name and spec: each
// parameter draws from its own PCG stream (seeded by seed and a hash of its
// name) through a hand-written Box-Muller transform, so the same seed gives
// the same bits on every Go version. It panics on a programmer error: a dst
// of the wrong length, an unknown Init, fans that cannot scale it.
func InitParams(specs []ParamSpec, seed uint64, dst [][]float32) {
	if len(dst) != len(specs) {
		panic(fmt.Sprintf("models: InitParams: %d destinations for %d parameters", len(dst), len(specs)))
	}
	for i, s := range specs {
		if len(dst[i]) != s.Size() {
			panic(fmt.Sprintf("models: InitParams: %s: %d elements for shape %v", s.Name, len(dst[i]), s.Shape))
		}
		if err := initParam(s, seed, dst[i]); err != nil {
			panic(fmt.Sprintf("models: InitParams: %s: %v", s.Name, err))
		}
	}
}

// CheckParams reports, without drawing anything, the first parameter whose
// initialisation InitParams would refuse (a Normal without a deviation, fans
// that cannot scale He or Xavier, an unknown Init), so that a trainer can
// fail on every PE before PE 0 draws.
func CheckParams(specs []ParamSpec) error {
	for _, s := range specs {
		if err := checkInit(s); err != nil {
			return fmt.Errorf("parameter %s: %w", s.Name, err)
		}
	}
	return nil
}

func checkInit(s ParamSpec) error {
	var fan int
	switch s.Init {
	case Zeros, Ones:
		return nil
	case Normal:
		if !(s.Std > 0) {
			return fmt.Errorf("normal init with standard deviation %g", s.Std)
		}
		return nil
	case HeNormal, HeUniform:
		fan = s.FanIn
	case XavierNormal, XavierUniform:
		fan = s.FanIn + s.FanOut
	default:
		return fmt.Errorf("unknown init %d", s.Init)
	}
	if fan <= 0 || s.FanIn < 0 || s.FanOut < 0 {
		return fmt.Errorf("fan-in %d and fan-out %d do not scale init %d", s.FanIn, s.FanOut, s.Init)
	}
	return nil
}

func initParam(s ParamSpec, seed uint64, dst []float32) error {
	if err := checkInit(s); err != nil {
		return err
	}
	switch s.Init {
	case Zeros:
		clear(dst)
		return nil
	case Ones:
		for i := range dst {
			dst[i] = 1
		}
		return nil
	}
	r := newDraws(seed, s.Name)
	fan := s.FanIn // He
	if s.Init == XavierNormal || s.Init == XavierUniform {
		fan = s.FanIn + s.FanOut
	}
	switch s.Init {
	case Normal:
		for i := range dst {
			dst[i] = float32(s.Std * r.normal())
		}
	case HeNormal, XavierNormal:
		std := math.Sqrt(2 / float64(fan))
		for i := range dst {
			dst[i] = float32(std * r.normal())
		}
	case HeUniform, XavierUniform:
		bound := math.Sqrt(6 / float64(fan))
		for i := range dst {
			dst[i] = float32(bound * (2*r.uniform() - 1))
		}
	}
	return nil
}

// draws turns a PCG stream into uniform and normal variates with fixed,
// documented arithmetic (math/rand/v2's own NormFloat64 may change).
type draws struct {
	pcg      *rand.PCG
	spare    float64
	hasSpare bool
}

func newDraws(seed uint64, name string) *draws {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &draws{pcg: rand.NewPCG(seed, h.Sum64())}
}

// uniform is in [0, 1): the top 53 bits of a PCG output.
func (d *draws) uniform() float64 { return float64(d.pcg.Uint64()>>11) / (1 << 53) }

// normal is a standard normal variate by the Box-Muller transform, which
// gives two per pair of uniforms.
func (d *draws) normal() float64 {
	if d.hasSpare {
		d.hasSpare = false
		return d.spare
	}
	u1 := 1 - d.uniform() // in (0, 1]: log is finite
	u2 := d.uniform()
	r := math.Sqrt(-2 * math.Log(u1))
	sin, cos := math.Sincos(2 * math.Pi * u2)
	d.spare, d.hasSpare = r*sin, true
	return r * cos
}
