package computetest

import (
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunJoiner is the conformance suite of compute.Joiner; it skips when e
// has none. Views of one arena that lie back to back join into one tensor
// over the same memory; anything else gives nil.
func RunJoiner(t *testing.T, e compute.Engine) {
	j := require[compute.Joiner](t, e, "joined parameter views")
	const n = 24
	base := e.Alloc(n)
	var arena compute.Arena
	switch d := base.(type) {
	case interface{ DevicePtr() uintptr }:
		arena = compute.Arena{Dev: d.DevicePtr(), N: n}
	default:
		h := compute.HostData(base)
		if h == nil {
			t.Skip("the engine's tensors are neither host memory nor device pointers")
		}
		arena = compute.HostArena(h)
	}
	a, b, c := e.View(arena, 0, 2, 3), e.View(arena, 6, 1, 3), e.View(arena, 9, 2, 3)
	joined := j.Join([]int{5, 3}, a, b, c)
	if joined == nil {
		t.Fatal("Join of three views back to back gave nil")
	}
	if got := joined.Shape(); len(got) != 2 || got[0] != 5 || got[1] != 3 {
		t.Fatalf("joined shape %v, want [5 3]", got)
	}
	vals := make([]float32, 15)
	for i := range vals {
		vals[i] = float32(i + 1)
	}
	e.SetTensor(joined, vals)
	for k, part := range []struct {
		v      compute.Tensor
		lo, hi int
	}{{a, 0, 6}, {b, 6, 9}, {c, 9, 15}} {
		got := read(e, part.v)
		for i, v := range got {
			if v != vals[part.lo+i] {
				t.Fatalf("view %d, element %d: %v after writing the joined tensor, want %v", k, i, v, vals[part.lo+i])
			}
		}
	}
	e.SetTensor(c, []float32{-1, -2, -3, -4, -5, -6})
	if got := read(e, joined); got[9] != -1 || got[14] != -6 {
		t.Fatalf("the joined tensor does not see a write through a view: %v", got)
	}
	if one := j.Join([]int{6}, a); one == nil || one.Size() != 6 {
		t.Fatal("Join of one view as another shape of its size gave nil")
	}
	for what, bad := range map[string]func() compute.Tensor{
		"out of order":   func() compute.Tensor { return j.Join([]int{9}, b, a) },
		"with a gap":     func() compute.Tensor { return j.Join([]int{12}, a, c) },
		"the wrong size": func() compute.Tensor { return j.Join([]int{4, 3}, a, b, c) },
		"of nothing":     func() compute.Tensor { return j.Join([]int{1}) },
	} {
		if got := bad(); got != nil {
			t.Errorf("Join %s gave a tensor of shape %v, want nil", what, got.Shape())
		}
	}
}
