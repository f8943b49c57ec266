package cpu

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"unsafe"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/computetest"
	"gorgonia.org/tensor"
)

// engines returns a one-thread engine per BLAS available in this build.
func engines(t *testing.T) map[string]*Engine {
	t.Helper()
	out := map[string]*Engine{}
	for _, k := range []blas.Kind{blas.Gonum, blas.OpenBLAS} {
		e, err := New(Options{BLAS: k, Threads: 1})
		if err != nil {
			t.Logf("%s not tested: %v", k, err)
			continue
		}
		out[string(k)] = e
	}
	return out
}

func TestConformance(t *testing.T) {
	for name, e := range engines(t) {
		t.Run(name, func(t *testing.T) { computetest.Run(t, e) })
	}
}

func TestViewSharesArenaMemory(t *testing.T) {
	e, err := New(Options{BLAS: blas.Gonum})
	if err != nil {
		t.Fatal(err)
	}
	arena := make([]float32, 10)
	v := e.View(compute.HostArena(arena), 2, 2, 3)
	e.SetTensor(v, []float32{1, 2, 3, 4, 5, 6})
	want := []float32{0, 0, 1, 2, 3, 4, 5, 6, 0, 0}
	for i := range arena {
		if arena[i] != want[i] {
			t.Fatalf("arena = %v after SetTensor on the view, want %v", arena, want)
		}
	}
	h := compute.HostData(v)
	if len(h) != 6 || cap(h) != 6 || unsafe.SliceData(h) != &arena[2] {
		t.Errorf("HostData(view) has len %d cap %d at %p; want 6, 6, %p", len(h), cap(h), unsafe.SliceData(h), &arena[2])
	}
	if n := testing.AllocsPerRun(5, func() { _ = compute.HostData(v) }); n != 0 {
		t.Errorf("HostData allocates %v times", n)
	}
	defer func() {
		if recover() == nil {
			t.Error("View past the end of the arena did not panic")
		}
	}()
	e.View(compute.HostArena(arena), 5, 2, 3)
}

func TestEngineNameFollowsEnvironment(t *testing.T) {
	t.Setenv(blas.EnvVar, "gonum")
	e, err := New(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "cpu/gonum" {
		t.Errorf("Name() = %q with %s=gonum, want cpu/gonum", e.Name(), blas.EnvVar)
	}
	t.Setenv(blas.EnvVar, "fastest")
	if _, err := New(Options{}); err == nil {
		t.Errorf("New succeeded with %s=fastest", blas.EnvVar)
	}
	if _, err := blas.Load(blas.OpenBLAS); err == nil {
		t.Setenv(blas.EnvVar, "auto")
		e, err := New(Options{Threads: 1})
		if err != nil || e.Name() != "cpu/openblas" {
			t.Errorf("New with OpenBLAS loadable and %s=auto: %v, %v; want cpu/openblas", blas.EnvVar, e, err)
		}
	}
}

func TestForeignTensorPanics(t *testing.T) {
	e, err := New(Options{BLAS: blas.Gonum})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Zero of a foreign tensor did not panic")
		}
	}()
	e.Zero(foreign{})
}

type foreign struct{}

func (foreign) Shape() compute.Shape { return compute.Shape{1} }
func (foreign) DType() compute.DType { return compute.F32 }
func (foreign) Size() int            { return 1 }

// gorgonia's own operations run on the engine's BLAS and agree with Gemm.
func TestGorgoniaUsesEngineBLAS(t *testing.T) {
	for _, k := range []blas.Kind{blas.Gonum, blas.OpenBLAS} {
		name := string(k)
		e, err := New(Options{BLAS: k, Threads: 1})
		if err != nil {
			t.Logf("%s not tested: %v", k, err)
			continue
		}
		if tensor.WhichBLAS() != tensor.BLAS(e.BLAS()) {
			t.Fatalf("%s: gorgonia uses %T", name, tensor.WhichBLAS())
		}
		a := e.Alloc(3, 4)
		b := e.Alloc(4, 2)
		e.SetTensor(a, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
		e.SetTensor(b, []float32{1, 0, 0, 1, 1, 0, 0, 1})
		c := e.Alloc(3, 2)
		e.Gemm(false, false, 1, a, b, 0, c)
		got, err := tensor.MatMul(a.(*Tensor).Dense(), b.(*Tensor).Dense())
		if err != nil {
			t.Fatal(err)
		}
		want := compute.HostData(c)
		for i, v := range got.Data().([]float32) {
			if v != want[i] {
				t.Fatalf("%s: tensor.MatMul = %v, Gemm = %v", name, got.Data(), want)
			}
		}
	}
}

func TestThreadsAndLogLine(t *testing.T) {
	for _, k := range []blas.Kind{blas.Gonum, blas.OpenBLAS} {
		var buf bytes.Buffer
		e, err := New(Options{BLAS: k, Threads: 2, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if err != nil {
			t.Logf("%s not tested: %v", k, err)
			continue
		}
		if got := e.BLAS().Threads(); got != 2 {
			t.Errorf("%s: %d threads after Options{Threads: 2}", k, got)
		}
		line := buf.String()
		if strings.Count(line, "\n") != 1 || !strings.Contains(line, "engine=cpu/"+string(k)) || !strings.Contains(line, "2 threads") {
			t.Errorf("%s: log %q, want one line naming the engine and its 2 threads", k, line)
		}
		if _, err := New(Options{BLAS: k, Threads: 1}); err != nil || e.BLAS().Threads() != 1 {
			t.Errorf("%s: %d threads after Options{Threads: 1} (%v)", k, e.BLAS().Threads(), err)
		}
	}
}
