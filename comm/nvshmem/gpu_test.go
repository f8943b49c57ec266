package nvshmem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/commtest"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/internal/cudalib"
)

// reopenFromEnv opens the backend again with this PE's configuration, for
// the suite's second-Open check.
func reopenFromEnv() (comm.Comm, error) {
	cfg, _, _, err := comm.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return comm.Open(Name, cfg)
}

// TestGPUConformance runs the conformance suite in jobs of 1, 2, 4 and 8 PE
// processes (SYMDDP_GPU_PES) on this host's GPUs.
func TestGPUConformance(t *testing.T) {
	lib := gpuLib(t)
	for _, n := range gpuPEs(t) {
		t.Run(fmt.Sprintf("NPEs=%d", n), func(t *testing.T) {
			job := launchtest.Job{NPEs: n, Backend: Name, Timeout: time.Minute, Env: gpuEnv(lib)}
			launchtest.Run(t, job, func(t *testing.T, c comm.Comm) {
				if c.NPEs() != n || !asComm(t, c).FixedOrder() {
					t.Fatalf("NPEs %d (want %d), fixed order %v", c.NPEs(), n, asComm(t, c).FixedOrder())
				}
				commtest.RunAll(t, c, commtest.Options{Reopen: reopenFromEnv})
			})
		})
	}
}

// TestGPUConformanceNVSHMEM runs the suite with every peer treated as out of
// pointer reach (SYMDDP_FORCE_NVSHMEM=1), so that the paths for peers on
// other nodes (NVSHMEM puts, gets, barriers and team reductions) run on one
// host. NVSHMEM's collectives need MPS when PEs share a GPU.
func TestGPUConformanceNVSHMEM(t *testing.T) {
	lib := gpuLib(t)
	if !underMPS() {
		t.Skip("needs MPS (SYMDDP_TEST_MPS=1): NVSHMEM's collectives abort in limited-MPG mode")
	}
	for _, n := range gpuPEs(t) {
		t.Run(fmt.Sprintf("NPEs=%d", n), func(t *testing.T) {
			job := launchtest.Job{NPEs: n, Backend: Name, Timeout: time.Minute, Env: append(gpuEnv(lib), "SYMDDP_FORCE_NVSHMEM=1")}
			launchtest.Run(t, job, func(t *testing.T, c comm.Comm) {
				if asComm(t, c).FixedOrder() {
					t.Fatalf("fixed order with the NVSHMEM paths forced")
				}
				commtest.RunAll(t, c, commtest.Options{Reopen: reopenFromEnv})
			})
		})
	}
}

// TestGPUInfo checks what one PE reports about its GPU and runtime.
func TestGPUInfo(t *testing.T) {
	lib := gpuLib(t)
	launchtest.Run(t, launchtest.Job{NPEs: 1, Backend: Name, Timeout: time.Minute, Env: gpuEnv(lib)}, func(t *testing.T, c comm.Comm) {
		nc := asComm(t, c)
		in := nc.Info()
		t.Logf("%s (GPU %d of %d, %d SMs), NVSHMEM %d.%d.%d, CUDA runtime %d, driver %d, %d blocks per collective",
			in.DeviceName, in.Device, in.DeviceCount, in.SMCount, in.NVSHMEMVersion[0], in.NVSHMEMVersion[1],
			in.NVSHMEMVersion[2], in.CUDARuntime, in.CUDADriver, in.MaxBlocks)
		if in.NPEs != 1 || in.DeviceCount < 1 || in.SMCount < 1 || in.MaxBlocks < 1 || !in.AllReachable || nc.Stream() == 0 {
			t.Fatalf("info %+v, stream %#x", in, nc.Stream())
		}
		b, err := c.Alloc(comm.Float32, 5)
		if err != nil {
			t.Fatal(err)
		}
		p := b.(comm.DeviceBuffer).DevicePtr()
		peer, err := nc.lib.PeerPtr(b.(*buffer).sym, 0)
		if err != nil || p == 0 || p%16 != 0 || peer != p {
			t.Fatalf("device pointer %#x, own peer pointer %#x (%v)", p, peer, err)
		}
		if err := c.Free(b); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGPUAllReduceKernels checks every algorithm on float32 and bfloat16 at
// the sizes and offsets where the kernels change paths (scalar head and
// tail, one vector, block and one-shot limits, owner slices), bit for bit
// against the PE-order fold, and that elements outside the range stay.
func TestGPUAllReduceKernels(t *testing.T) {
	kernelJobs(t, kernelChecks, broadcastBytes)
}

// TestGPUShardedKernels checks the reduce-scatter and the all-gather
// against the allreduce, bit for bit, on float32 and bfloat16 at the sizes
// where shards have scalar heads and tails (odd lengths, odd offsets) and
// where some PEs' shards are empty (fewer elements than PEs): each PE's
// shard after ReduceScatter holds the allreduce's bits and the rest of its
// copy its own data; AllGather after it leaves every PE with the
// allreduce's result. Then byte all-gathers off 16-byte boundaries.
func TestGPUShardedKernels(t *testing.T) {
	kernelJobs(t, shardedChecks, allGatherBytes)
}

// kernelJobs runs a job of every PE count (gpuPEs) whose PEs run check on
// a float32 and a bfloat16 buffer, then bytes.
func kernelJobs(t *testing.T, check func(t *testing.T, c *Comm, kind comm.Kind), bytes func(t *testing.T, c *Comm)) {
	lib := gpuLib(t)
	for _, n := range gpuPEs(t) {
		t.Run(fmt.Sprintf("NPEs=%d", n), func(t *testing.T) {
			job := launchtest.Job{NPEs: n, Backend: Name, Timeout: time.Minute, Env: gpuEnv(lib)}
			launchtest.Run(t, job, func(t *testing.T, c comm.Comm) {
				nc := asComm(t, c)
				for _, kind := range []comm.Kind{comm.Float32, comm.BFloat16} {
					check(t, nc, kind)
				}
				bytes(t, nc)
			})
		})
	}
}

// seededBuffer allocates a symmetric buffer of total elements of kind and
// returns it with this PE's values for it (commtest.Value of seed), as
// bits, not yet written.
func seededBuffer(t *testing.T, c *Comm, kind comm.Kind, seed uint64, total int) ([]uint32, comm.Buffer) {
	t.Helper()
	mine := make([]uint32, total)
	for i := range mine {
		mine[i] = toBits(kind, commtest.Value(seed, c.me, i))
	}
	b, err := c.Alloc(kind, total)
	if err != nil {
		t.Fatal(err)
	}
	return mine, b
}

func shardedChecks(t *testing.T, c *Comm, kind comm.Kind) {
	const total = 65541 + 16
	sizes := []int{1, 3, 7, 33, 4095, 65541}
	offsets := []int{0, 5}
	mine, b := seededBuffer(t, c, kind, 0x5ca+uint64(kind), total)
	for _, n := range sizes {
		for _, off := range offsets {
			lo, hi := comm.Shard(off, n, c.npes, c.me)
			for _, op := range []comm.Op{comm.Sum, comm.Mean, comm.Max, comm.Min} {
				what := fmt.Sprintf("PE %d: %s %s of [%d, %d) on %d PEs (shard [%d, %d))", c.me, kind, op, off, off+n, c.npes, lo, hi)
				putBits(t, c, b, mine)
				if err := c.AllReduce(b, off, n, op); err != nil {
					t.Fatalf("%s: allreduce: %v", what, err)
				}
				reduced := getBits(t, c, b)
				putBits(t, c, b, mine)
				if err := c.ReduceScatter(b, off, n, op); err != nil {
					t.Fatalf("%s: reduce-scatter: %v", what, err)
				}
				want := slices.Clone(mine)
				copy(want[lo:hi], reduced[lo:hi])
				if d := firstDiff(getBits(t, c, b), want); d != "" {
					t.Fatalf("%s: reduce-scatter against the allreduce: %s", what, d)
				}
				if err := c.AllGather(b, off, n); err != nil {
					t.Fatalf("%s: all-gather: %v", what, err)
				}
				if d := firstDiff(getBits(t, c, b), reduced); d != "" {
					t.Fatalf("%s: reduce-scatter and all-gather against the allreduce: %s", what, d)
				}
			}
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(b); err != nil {
		t.Fatal(err)
	}
}

// allGatherBytes gathers byte ranges that start and end off 16-byte
// boundaries (and a range shorter than the PE count).
func allGatherBytes(t *testing.T, c *Comm) {
	ranges := [][2]int{{3, 4003}, {17, 20}, {0, byteLen}}
	byteRounds(t, c, len(ranges), "all-gather", func(b comm.Buffer, k int) ([]byte, error) {
		lo, hi := ranges[k][0], ranges[k][1]
		want := bytePattern(c.me)
		for p := range c.npes {
			plo, phi := comm.Shard(lo, hi-lo, c.npes, p)
			copy(want[plo:phi], bytePattern(p)[plo:phi])
		}
		return want, c.AllGather(b, lo, hi-lo)
	})
}

// buffer contents as bits (float32 bits, or bfloat16 bits in the low half).
func putBits(t *testing.T, c *Comm, b comm.Buffer, bits []uint32) {
	t.Helper()
	sb := b.(*buffer)
	es := sb.kind.Size()
	raw := make([]byte, es*len(bits))
	for i, x := range bits {
		if es == 4 {
			binary.LittleEndian.PutUint32(raw[4*i:], x)
		} else {
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(x))
		}
	}
	if err := c.lib.Put(sb.sym, 0, raw, c.me); err != nil {
		t.Fatalf("PE %d: fill: %v", c.me, err)
	}
}

func getBits(t *testing.T, c *Comm, b comm.Buffer) []uint32 {
	t.Helper()
	sb := b.(*buffer)
	es := sb.kind.Size()
	raw := make([]byte, es*sb.n)
	if err := c.lib.Get(raw, sb.sym, 0, c.me); err != nil {
		t.Fatalf("PE %d: read: %v", c.me, err)
	}
	out := make([]uint32, sb.n)
	for i := range out {
		if es == 4 {
			out[i] = binary.LittleEndian.Uint32(raw[4*i:])
		} else {
			out[i] = uint32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	}
	return out
}

// toBits is x in the buffer's precision, as bits.
func toBits(kind comm.Kind, x float32) uint32 {
	if kind == comm.BFloat16 {
		return uint32(bf16(x))
	}
	return math.Float32bits(x)
}

func kernelChecks(t *testing.T, c *Comm, kind comm.Kind) {
	const total = 262147 + 16
	sizes := []int{1, 2, 3, 4, 5, 8, 9, 63, 4095, 65536, 65541, 262147}
	offsets := []int{0, 1, 5}
	algos := []cudalib.Algo{cudalib.OneShot, cudalib.TwoShot, cudalib.Auto}
	ops := []comm.Op{comm.Sum, comm.Mean, comm.Max, comm.Min}
	seed := 0x6b1 + uint64(kind)
	// Every PE's data in the buffer's precision, and what reductions give.
	data := make([][]float32, c.npes)
	for pe := range data {
		data[pe] = make([]float32, total)
		for i := range data[pe] {
			v := commtest.Value(seed, pe, i)
			if kind == comm.BFloat16 {
				v = widen(bf16(v))
			}
			data[pe][i] = v
		}
	}
	ref := makeReference(data)
	mine := make([]uint32, total)
	for i, v := range data[c.me] {
		mine[i] = toBits(kind, v)
	}
	b, err := c.Alloc(kind, total)
	if err != nil {
		t.Fatal(err)
	}
	for _, algo := range algos {
		for _, n := range sizes {
			for _, off := range offsets {
				if algo == cudalib.OneShot && !c.OneShotFits(kind, n) {
					continue // more than one-shot's registers hold
				}
				for _, op := range ops {
					putBits(t, c, b, mine)
					if err := c.allReduce(b, off, n, op, algo); err != nil {
						t.Fatalf("PE %d: %s %s allreduce %s of [%d, %d): %v", c.me, kind, algo, op, off, off+n, err)
					}
					want := slices.Clone(mine)
					for i := off; i < off+n; i++ {
						want[i] = toBits(kind, ref.of(op)[i])
					}
					if d := firstDiff(getBits(t, c, b), want); d != "" {
						t.Fatalf("PE %d: %s %s allreduce %s of [%d, %d) on %d PEs: %s", c.me, kind, algo, op, off, off+n, c.npes, d)
					}
				}
			}
		}
	}
	// Reduce to the last PE: its copy holds the reduction, the others theirs.
	root := c.npes - 1
	for _, n := range []int{5, 65541} {
		for _, op := range []comm.Op{comm.Sum, comm.Mean} {
			putBits(t, c, b, mine)
			if err := c.Reduce(b, 3, n, op, root); err != nil {
				t.Fatalf("PE %d: %s reduce %s of [3, %d): %v", c.me, kind, op, 3+n, err)
			}
			want := slices.Clone(mine)
			if c.me == root {
				for i := 3; i < 3+n; i++ {
					want[i] = toBits(kind, ref.of(op)[i])
				}
			}
			if d := firstDiff(getBits(t, c, b), want); d != "" {
				t.Fatalf("PE %d: %s reduce %s to PE %d of [3, %d): %s", c.me, kind, op, root, 3+n, d)
			}
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(b); err != nil {
		t.Fatal(err)
	}
}

// broadcastBytes broadcasts byte ranges that start and end off 16-byte
// boundaries from every root.
func broadcastBytes(t *testing.T, c *Comm) {
	byteRounds(t, c, c.npes, "broadcast", func(b comm.Buffer, root int) ([]byte, error) {
		want := bytePattern(c.me)
		copy(want[3:4003], bytePattern(root)[3:4003])
		return want, c.Broadcast(b, 3, 4000, root)
	})
}

// byteLen is the length of the byte buffers of broadcastBytes and
// allGatherBytes.
const byteLen = 5000

// bytePattern is PE pe's data in the byte checks.
func bytePattern(pe int) []byte {
	p := make([]byte, byteLen)
	for i := range p {
		p[i] = byte(pe*37 + i*11 + 1)
	}
	return p
}

// byteRounds runs rounds of a byte collective on a byteLen-byte buffer:
// each round fills this PE's copy with its bytePattern, meets the peers,
// runs the collective (round returns what the copy must hold after it) and
// compares.
func byteRounds(t *testing.T, c *Comm, rounds int, what string, round func(b comm.Buffer, k int) ([]byte, error)) {
	b, err := c.Alloc(comm.Byte, byteLen)
	if err != nil {
		t.Fatal(err)
	}
	for k := range rounds {
		if err := c.PutBytes(b, 0, bytePattern(c.me), c.me); err != nil {
			t.Fatal(err)
		}
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
		want, err := round(b, k)
		if err != nil {
			t.Fatalf("PE %d: byte %s, round %d: %v", c.me, what, k, err)
		}
		got := make([]byte, byteLen)
		if err := c.GetBytes(got, b, 0, c.me); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("PE %d: byte %s, round %d, differs", c.me, what, k)
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(b); err != nil {
		t.Fatal(err)
	}
}

// TestGPUTimeoutNamesMissingPE: PE 1 arrives at a barrier after the
// deadline; PE 0's barrier gives up with a TimeoutError naming PE 1, the
// runtime refuses further collectives, and Close does not wait for peers.
func TestGPUTimeoutNamesMissingPE(t *testing.T) {
	lib := gpuLib(t)
	job := launchtest.Job{NPEs: 2, Backend: Name, Timeout: 3 * time.Second, Env: gpuEnv(lib)}
	launchtest.Run(t, job, func(t *testing.T, c comm.Comm) {
		b, err := c.Alloc(comm.Float32, 4)
		if err != nil {
			t.Fatal(err)
		}
		if c.MyPE() == 1 {
			time.Sleep(7 * time.Second)
			_ = c.Barrier() // PE 0 has given up: whatever happens here is fine
			_ = c.Close()   // and PE 0 will not meet this PE in Close
			return
		}
		err = c.Barrier()
		var te *comm.TimeoutError
		if !errors.As(err, &te) || te.Op != "barrier" || te.PE != 0 || !slices.Equal(te.Missing, []int{1}) || te.Deadline != 3*time.Second {
			t.Fatalf("barrier without PE 1: %v, want a TimeoutError naming PE 1", err)
		}
		if err := c.AllReduce(b, 0, 4, comm.Sum); !errors.As(err, &te) {
			t.Fatalf("allreduce after the timeout: %v, want the timeout again", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("close after a timeout: %v", err)
		}
	})
}

// TestGPUPeerExit: PE 1 exits (status 0, so the launcher lets the job go
// on); PE 0's next barrier fails naming PE 1 (gone, or not arrived by the
// deadline), and Close returns.
func TestGPUPeerExit(t *testing.T) {
	lib := gpuLib(t)
	job := launchtest.Job{NPEs: 2, Backend: Name, Timeout: 30 * time.Second, Env: gpuEnv(lib)}
	launchtest.Run(t, job, func(t *testing.T, c comm.Comm) {
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
		if c.MyPE() == 1 {
			syscall.Exit(0) // no deferred functions, no Close: gone
		}
		err := c.Barrier()
		var te *comm.TimeoutError
		peerGone := errors.Is(err, comm.ErrPeerFailed) && strings.Contains(err.Error(), "PE 1 ")
		if !peerGone && !(errors.As(err, &te) && slices.Equal(te.Missing, []int{1})) {
			t.Fatalf("barrier after PE 1 exited: %v, want ErrPeerFailed or a timeout naming PE 1", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("close after a peer failure: %v", err)
		}
	})
}

// TestGPUKilledPE kills PE 1 of 2 with SIGKILL while both loop over
// allreduces of 4 MiB: the launcher must name PE 1 and the signal.
func TestGPUKilledPE(t *testing.T) {
	lib := gpuLib(t)
	if underMPS() {
		t.Skip("runs without MPS: a killed MPS client may disturb the other clients")
	}
	_, err := launchtest.Launch(t, launchtest.Job{NPEs: 2, Backend: Name, Timeout: time.Minute, Env: gpuEnv(lib)}, func(t *testing.T, c comm.Comm) {
		b, err := c.Alloc(comm.Float32, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if c.MyPE() == 1 {
			go func() {
				time.Sleep(500 * time.Millisecond)
				fmt.Fprintln(os.Stderr, "killing myself")
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}()
		}
		for i := 0; i < 1_000_000; i++ {
			if err := c.AllReduce(b, 0, b.Len(), comm.Sum); err != nil {
				t.Fatalf("allreduce %d: %v", i, err)
			}
		}
		t.Errorf("PE %d: a million allreduces and PE 1 is still alive", c.MyPE())
	})
	var pe *launch.PEError
	if !errors.As(err, &pe) || pe.PE != 1 || pe.Signal != syscall.SIGKILL {
		t.Fatalf("launcher returned %v, want PE 1 killed by SIGKILL", err)
	}
}
