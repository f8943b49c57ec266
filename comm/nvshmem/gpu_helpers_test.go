package nvshmem

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/cudalib"
)

// Tests named TestGPU* need the real library and a GPU; they skip with one
// line otherwise. They start jobs of PE processes on this host through
// comm/launch/launchtest. Environment:
//
//	SYMDDP_CUDA_LIB   the library (else cudalib.Load's search)
//	SYMDDP_GPU_PES    PE counts of the multi-PE tests, e.g. "1,2,4,8" (default)
//	SYMDDP_TEST_MPS   set to 1 when an MPS daemon serves the PEs: enables the
//	                  NVSHMEM-collective fallback test, disables the SIGKILL test
//	SYMDDP_DESYNC_CHECK  passed on to the PEs (off: the desync tests skip)

// gpuLib returns the real library, or skips the test with one line.
func gpuLib(t testing.TB) *cudalib.Lib {
	t.Helper()
	lib, err := cudalib.Load("")
	if err != nil {
		t.Skip("no GPU library: " + err.Error())
	}
	if _, err := lib.DeviceCount(); err != nil {
		t.Skip("no GPU: " + err.Error())
	}
	return lib
}

// gpuEnv is the environment the PEs of a GPU job get on top of this
// process's (the launcher drops SYMDDP_* variables, so they are passed here).
func gpuEnv(lib *cudalib.Lib) []string {
	env := []string{cudalib.EnvLib + "=" + lib.Path(), "NVSHMEM_DISABLE_NVLS=1"}
	for _, name := range []string{"SYMDDP_ONE_SHOT_MAX", "SYMDDP_MAX_BLOCKS", "SYMDDP_TEST_MPS", "SYMDDP_DESYNC_CHECK"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// gpuPEs are the PE counts of the multi-PE tests.
func gpuPEs(t testing.TB) []int {
	v := os.Getenv("SYMDDP_GPU_PES")
	if v == "" {
		return []int{1, 2, 4, 8}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("SYMDDP_GPU_PES=%q: want PE counts such as 1,2,4,8", v)
		}
		out = append(out, n)
	}
	return out
}

func underMPS() bool { return os.Getenv("SYMDDP_TEST_MPS") == "1" }

// asComm is c as this package's Comm.
func asComm(t testing.TB, c comm.Comm) *Comm {
	t.Helper()
	nc, ok := c.(*Comm)
	if !ok {
		t.Fatalf("a %T, not an nvshmem Comm", c)
	}
	return nc
}

// bf16 rounds x to bfloat16 (nearest, ties to even), as bits.
func bf16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40 // a quiet NaN
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// widen is the float32 value of bfloat16 bits.
func widen(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// reference holds, for every element of a buffer, what each operator must
// give over every PE's data: the float32 left fold in PE order, divided by
// float32(N) for Mean; Go's max and min.
type reference struct {
	sum, mean, max, min []float32
}

func (r *reference) of(op comm.Op) []float32 {
	switch op {
	case comm.Sum:
		return r.sum
	case comm.Mean:
		return r.mean
	case comm.Max:
		return r.max
	}
	return r.min
}

// makeReference reduces data[pe][i] over the PEs.
func makeReference(data [][]float32) reference {
	n := len(data[0])
	r := reference{make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := 0; i < n; i++ {
		s, mx, mn := data[0][i], data[0][i], data[0][i]
		for pe := 1; pe < len(data); pe++ {
			v := data[pe][i]
			s += v
			mx, mn = max(mx, v), min(mn, v)
		}
		r.sum[i], r.mean[i], r.max[i], r.min[i] = s, s/float32(len(data)), mx, mn
	}
	return r
}

// firstDiff describes the first difference of got and want, or "".
func firstDiff(got, want []uint32) string {
	for i := range got {
		if got[i] != want[i] {
			bad := 0
			for j := i; j < len(got); j++ {
				if got[j] != want[j] {
					bad++
				}
			}
			return fmt.Sprintf("element %d is %#x, want %#x (%d of %d differ)", i, got[i], want[i], bad, len(got))
		}
	}
	return ""
}
