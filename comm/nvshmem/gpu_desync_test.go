package nvshmem

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/commtest"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/internal/cudalib"
)

// desyncDeadline is the deadline of the desync jobs: a desync that the
// check misses shows as a timeout after it (which the cases reject), and
// it is short so that such a failure costs little GPU time.
const desyncDeadline = 20 * time.Second

// desyncPEs are the PE counts of the desync jobs: gpuPEs without 1.
func desyncPEs(t testing.TB) []int {
	var out []int
	for _, n := range gpuPEs(t) {
		if n >= 2 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		t.Skip("SYMDDP_GPU_PES has no job of 2 PEs or more")
	}
	return out
}

// TestGPUDesync runs the suite's desync cases (commtest.DesyncCases), each
// in a job of its own, at every PE count of 2 or more: every PE must fail
// the mismatched collective at once with the one line naming the calls,
// found by the kernels' entry barriers, and stay unusable.
func TestGPUDesync(t *testing.T) {
	desyncJobs(t, gpuEnv(gpuLib(t)), true)
}

// TestGPUDesyncNVSHMEM runs the desync cases with every peer treated as out
// of pointer reach (SYMDDP_FORCE_NVSHMEM=1): the calls are compared on the
// host before NVSHMEM's collectives, which need MPS when PEs share a GPU.
func TestGPUDesyncNVSHMEM(t *testing.T) {
	lib := gpuLib(t)
	if !underMPS() {
		t.Skip("needs MPS (SYMDDP_TEST_MPS=1): NVSHMEM's collectives abort in limited-MPG mode")
	}
	desyncJobs(t, append(gpuEnv(lib), "SYMDDP_FORCE_NVSHMEM=1"), false)
}

// desyncJobs runs every desync case in a job of its own with env, at every
// PE count of 2 or more; reachable: whether every peer is in pointer reach.
func desyncJobs(t *testing.T, env []string, reachable bool) {
	for _, n := range desyncPEs(t) {
		for _, dc := range commtest.DesyncCases {
			t.Run(fmt.Sprintf("NPEs=%d/%s", n, dc.Name), func(t *testing.T) {
				job := launchtest.Job{NPEs: n, Backend: Name, Timeout: desyncDeadline, Env: env}
				launchtest.Run(t, job, func(t *testing.T, c comm.Comm) {
					nc := asComm(t, c)
					if !nc.check {
						t.Skip("the desync check is off (SYMDDP_DESYNC_CHECK)")
					}
					if nc.info.AllReachable != reachable {
						t.Fatalf("every peer in pointer reach: %v, want %v", nc.info.AllReachable, reachable)
					}
					dc.Run(t, c)
				})
			})
		}
	}
}

// TestGPUDesyncEndsJob has PE 1 of 3 call Barrier while the others call
// AllReduce, and every PE report its error and exit as a program would:
// the launcher's error must carry the line that names PE 1, the others and
// both calls, without the deadline having passed.
func TestGPUDesyncEndsJob(t *testing.T) {
	lib := gpuLib(t)
	const desyncExit = 3
	_, err := launchtest.Launch(t, launchtest.Job{NPEs: 3, Backend: Name, Timeout: time.Minute, Env: gpuEnv(lib)}, func(t *testing.T, c comm.Comm) {
		b, err := c.Alloc(comm.Float32, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if c.MyPE() == 1 {
			err = c.Barrier()
		} else {
			err = c.AllReduce(b, 0, b.Len(), comm.Sum)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(desyncExit)
	})
	var pe *launch.PEError
	if !errors.As(err, &pe) || pe.ExitCode != desyncExit {
		t.Fatalf("launcher returned %v, want a PE failing with status %d", err, desyncExit)
	}
	op := "allreduce"
	if pe.PE == 1 {
		op = "barrier"
	}
	want := fmt.Sprintf("nvshmem: PE %d: %s: collective #2: PEs 0, 2 call allreduce(sum, 4000 bytes: float32 [0, 1000) of buffer #1); PE 1 calls barrier(): %v",
		pe.PE, op, comm.ErrDesync)
	found := false
	for _, line := range pe.Stderr {
		found = found || line == want
	}
	if !found {
		t.Errorf("PE %d's stderr\n\t%s\nhas no line\n\t%s", pe.PE, strings.Join(pe.Stderr, "\n\t"), want)
	}
	if strings.Contains(err.Error(), "deadline") {
		t.Errorf("the job waited for the deadline: %v", err)
	}
}

// TestGPUDesyncInGraph: the collectives of a CUDA graph keep the calls
// they were captured with, and the replayed graph's kernels compare them.
// Every PE captures an allreduce of 4096 elements (graph A) and one of
// 4095 (graph B); three replays of A on every PE pass and sum (no desync
// taken for one across replays); then PE 1 replays B while the others
// replay A: every PE's wait fails with the library's desync naming both
// calls, no data moved, and the Comm reports the desync at its next call.
func TestGPUDesyncInGraph(t *testing.T) {
	lib := gpuLib(t)
	for _, n := range desyncPEs(t) {
		t.Run(fmt.Sprintf("NPEs=%d", n), func(t *testing.T) {
			job := launchtest.Job{NPEs: n, Backend: Name, Timeout: desyncDeadline, Env: gpuEnv(lib)}
			launchtest.Run(t, job, func(t *testing.T, c comm.Comm) {
				graphDesync(t, asComm(t, c))
			})
		})
	}
}

func graphDesync(t *testing.T, c *Comm) {
	if !c.check || !c.info.AllReachable {
		t.Skip("needs the desync check on and every peer in pointer reach")
	}
	runtime.LockOSThread() // the capture is the thread's
	defer runtime.UnlockOSThread()
	const n = 4096
	b, err := c.Alloc(comm.Float32, n)
	if err != nil {
		t.Fatal(err)
	}
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := c.PutFloat32(b, 0, ones, c.me); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	cp, err := cudalib.OpenCompute(c.lib)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := cp.NewContext(c.Stream(), c.info.Device)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	capture := func(count int) uint64 {
		if err := ctx.CaptureBegin(); err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduceEnqueue(b, 0, count, comm.Sum); err != nil {
			t.Fatal(err)
		}
		exec, err := ctx.CaptureEnd()
		if err != nil {
			t.Fatal(err)
		}
		return exec
	}
	graphA, graphB := capture(n), capture(n-1)
	defer ctx.GraphDestroy(graphA)
	defer ctx.GraphDestroy(graphB)
	for r := range 3 {
		if err := ctx.GraphLaunch(graphA, cudalib.StepValues{}); err != nil {
			t.Fatal(err)
		}
		if err := ctx.Sync(desyncDeadline); err != nil {
			t.Fatalf("PE %d: replay %d of the same graph on every PE: %v", c.me, r, err)
		}
	}
	want := float32(math.Pow(float64(c.npes), 3))
	checkAll := func(when string) {
		got := make([]float32, n)
		if err := c.lib.CopyDtoH(unsafe.Slice((*byte)(unsafe.Pointer(&got[0])), 4*n), b.(comm.DeviceBuffer).DevicePtr()); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != want {
				t.Fatalf("PE %d: %s: element %d is %v, want %v (%d PEs, three sums)", c.me, when, i, v, want, c.npes)
			}
		}
	}
	checkAll("after three replays")

	mine := graphA
	if c.me == 1 {
		mine = graphB
	}
	if err := ctx.GraphLaunch(mine, cudalib.StepValues{}); err != nil {
		t.Fatal(err)
	}
	err = ctx.Sync(desyncDeadline)
	if !errors.Is(err, cudalib.ErrDesync) || errors.Is(err, cudalib.ErrTimeout) {
		t.Fatalf("PE %d: PE 1 replaying the other graph: %v, want the library's desync", c.me, err)
	}
	msg := err.Error()
	var others []string
	for q := 0; q < c.npes; q++ {
		if q != 1 {
			others = append(others, fmt.Sprint(q))
		}
	}
	verb := "PE " + others[0] + " calls"
	if len(others) > 1 {
		verb = "PEs " + strings.Join(others, ", ") + " call"
	}
	for _, part := range []string{
		verb + " allreduce(sum, 16384 bytes: float32 [0, 4096) of buffer #1)",
		"PE 1 calls allreduce(sum, 16380 bytes: float32 [0, 4095) of buffer #1)",
		"PEs called different collectives (desync)",
	} {
		if !strings.Contains(msg, part) {
			t.Errorf("PE %d: the error\n\t%s\ndoes not say\n\t%s", c.me, msg, part)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("PE %d: the error has more than one line: %q", c.me, msg)
	}
	checkAll("after the mismatched replay")
	if err := c.Barrier(); !errors.Is(err, comm.ErrDesync) {
		t.Errorf("PE %d: a barrier after the graph's desync: %v, want the desync", c.me, err)
	}
}

// BenchmarkGPUDesyncCheck measures what the desync check costs the
// latency-bound collectives, in jobs of every PE count of 2 or more, with
// the check on and off (SYMDDP_DESYNC_CHECK): a barrier and a one-shot
// allreduce of 4 KiB, as the GPU runs them back to back (Kernel: CUDA events
// around b.N of them, what a CUDA graph of a training step sees) and as the
// host calls them one by one (each waited for). Under MPS with several PEs
// on one GPU, or with a GPU per PE; ns/op is PE 0's.
func BenchmarkGPUDesyncCheck(b *testing.B) {
	lib := gpuLib(b)
	const n4KiB = 1024
	for _, n := range desyncPEs(b) {
		for _, check := range []string{"on", "off"} {
			job := launchtest.Job{NPEs: n, Backend: Name, Timeout: time.Minute,
				Env: append(gpuEnv(lib), comm.EnvDesyncCheck+"="+check)}
			b.Run(fmt.Sprintf("NPEs=%d/check=%s", n, check), func(b *testing.B) {
				b.Run("BarrierKernel", func(b *testing.B) {
					launchtest.Bench(b, job, func(b *testing.B, c comm.Comm) {
						d, err := asComm(b, c).TimeBarrier(50, b.N)
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(d.Nanoseconds()), "ns/op")
					})
				})
				b.Run("AllReduce4KiBKernel", func(b *testing.B) {
					launchtest.Bench(b, job, func(b *testing.B, c comm.Comm) {
						nc := asComm(b, c)
						buf, err := c.Alloc(comm.Float32, n4KiB)
						if err != nil {
							b.Fatal(err)
						}
						d, err := nc.TimeAllReduce(buf, n4KiB, comm.Sum, AlgoOneShot, 50, b.N)
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(d.Nanoseconds()), "ns/op")
					})
				})
				b.Run("Barrier", func(b *testing.B) {
					launchtest.Bench(b, job, func(b *testing.B, c comm.Comm) {
						for i := 0; i < b.N; i++ {
							if err := c.Barrier(); err != nil {
								b.Fatal(err)
							}
						}
					})
				})
				b.Run("AllReduce4KiB", func(b *testing.B) {
					launchtest.Bench(b, job, func(b *testing.B, c comm.Comm) {
						buf, err := c.Alloc(comm.Float32, n4KiB)
						if err != nil {
							b.Fatal(err)
						}
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							if err := c.AllReduce(buf, 0, n4KiB, comm.Sum); err != nil {
								b.Fatal(err)
							}
						}
					})
				})
			})
		}
	}
}
