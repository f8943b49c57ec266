package commtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/symddp/symddp/comm"
)

// Barrier checks that data put before a barrier is visible after it, round
// after round: PE p writes round r into slot p of its right neighbour.
func Barrier(t *testing.T, c comm.Comm) {
	npes, me := c.NPEs(), c.MyPE()
	b := alloc(t, c, comm.Float32, npes)
	defer free(t, c, b)
	right, left := (me+1)%npes, (me+npes-1)%npes
	for r := 1; r <= 20; r++ {
		must(t, c, "p", c.P(b, me, float32(r*1000+me), right))
		must(t, c, "barrier", c.Barrier())
		got, err := c.G(b, left, me)
		must(t, c, "g", err)
		if want := float32(r*1000 + left); got != want {
			t.Fatalf("PE %d: round %d: after the barrier slot %d holds %v, want %v", me, r, left, got, want)
		}
		must(t, c, "barrier", c.Barrier())
	}
}

// PutGet checks PutFloat32 and GetFloat32 between every pair of PEs: PE p
// puts its data into region p of every PE's buffer, then every PE checks
// every region, reads every peer's region from that peer, and reads a part
// of it at an offset.
func PutGet(t *testing.T, c comm.Comm, lengths []int) {
	npes, me := c.NPEs(), c.MyPE()
	for _, n := range lengths {
		seed := uint64(0x5075 + n)
		b := alloc(t, c, comm.Float32, n*npes)
		mine := values(seed, me, 0, n)
		for pe := 0; pe < npes; pe++ {
			must(t, c, "put", c.PutFloat32(b, me*n, mine, pe))
		}
		must(t, c, "barrier", c.Barrier())
		for pe := 0; pe < npes; pe++ {
			checkEqual(t, c, fmt.Sprintf("n=%d: region put by PE %d", n, pe), read(t, c, b, pe*n, n), values(seed, pe, 0, n))
			got := make([]float32, n)
			must(t, c, "get", c.GetFloat32(got, b, pe*n, pe))
			checkEqual(t, c, fmt.Sprintf("n=%d: get of PE %d's own region", n, pe), got, values(seed, pe, 0, n))
			if n > 2 {
				part := make([]float32, n-2)
				must(t, c, "get part", c.GetFloat32(part, b, pe*n+1, pe))
				checkEqual(t, c, fmt.Sprintf("n=%d: get of [1, n-1) from PE %d", n, pe), part, values(seed, pe, 1, n-2))
			}
		}
		must(t, c, "barrier", c.Barrier())
		free(t, c, b)
	}
}

// PutGetBytes checks PutBytes and GetBytes between every pair of PEs.
func PutGetBytes(t *testing.T, c comm.Comm) {
	npes, me := c.NPEs(), c.MyPE()
	const n = 13
	pattern := func(pe int) []byte {
		out := make([]byte, n)
		for i := range out {
			out[i] = byte(pe*31 + i*7 + 1)
		}
		return out
	}
	b := alloc(t, c, comm.Byte, n*npes)
	defer free(t, c, b)
	for pe := 0; pe < npes; pe++ {
		must(t, c, "put bytes", c.PutBytes(b, me*n, pattern(me), pe))
	}
	must(t, c, "barrier", c.Barrier())
	for pe := 0; pe < npes; pe++ {
		got := make([]byte, n)
		must(t, c, "get bytes", c.GetBytes(got, b, pe*n, me))
		if !bytes.Equal(got, pattern(pe)) {
			t.Fatalf("PE %d: bytes put by PE %d = %v, want %v", me, pe, got, pattern(pe))
		}
		must(t, c, "get bytes", c.GetBytes(got, b, pe*n, pe))
		if !bytes.Equal(got, pattern(pe)) {
			t.Fatalf("PE %d: bytes got from PE %d = %v, want %v", me, pe, got, pattern(pe))
		}
	}
	must(t, c, "barrier", c.Barrier())
}

// PG checks the single-element P and G to and from every PE.
func PG(t *testing.T, c comm.Comm) {
	npes, me := c.NPEs(), c.MyPE()
	val := func(from, to int) float32 { return float32(from*100+to) + 0.25 }
	b := alloc(t, c, comm.Float32, npes)
	defer free(t, c, b)
	for pe := 0; pe < npes; pe++ {
		must(t, c, "p", c.P(b, me, val(me, pe), pe))
	}
	must(t, c, "barrier", c.Barrier())
	for pe := 0; pe < npes; pe++ {
		got, err := c.G(b, pe, me)
		must(t, c, "g", err)
		if got != val(pe, me) {
			t.Fatalf("PE %d: P from PE %d left %v, want %v", me, pe, got, val(pe, me))
		}
		got, err = c.G(b, me, pe)
		must(t, c, "g", err)
		if got != val(me, pe) {
			t.Fatalf("PE %d: G of PE %d's slot %d = %v, want %v", me, pe, me, got, val(me, pe))
		}
	}
	must(t, c, "barrier", c.Barrier())
}

// SignalRing passes data around the ring with PutSignal and WaitUntil: in
// round r PE p puts its data into slot r of its right neighbour's buffer,
// adds 1 to signal 0 and sets signal 1 to 100+r; the neighbour waits for both
// signals and must then see the data (the signal is ordered after it).
func SignalRing(t *testing.T, c comm.Comm) {
	npes, me := c.NPEs(), c.MyPE()
	const rounds, m = 4, 257
	right, left := (me+1)%npes, (me+npes-1)%npes
	data := alloc(t, c, comm.Float32, rounds*m)
	defer free(t, c, data)
	sig := alloc(t, c, comm.Uint64, 2)
	defer free(t, c, sig)
	must(t, c, "barrier", c.Barrier())
	for r := 0; r < rounds; r++ {
		seed := uint64(0x516 + r)
		must(t, c, "put signal add", c.PutSignal(data, r*m, values(seed, me, 0, m), sig, 0, 1, comm.SignalAdd, right))
		must(t, c, "wait until", c.WaitUntil(sig, 0, comm.CmpGE, uint64(r+1)))
		checkEqual(t, c, fmt.Sprintf("round %d: data signalled by PE %d", r, left), read(t, c, data, r*m, m), values(seed, left, 0, m))
		must(t, c, "barrier", c.Barrier()) // every PE has seen round r's signal 1
		must(t, c, "put signal set", c.PutSignal(data, r*m, nil, sig, 1, uint64(100+r), comm.SignalSet, right))
		must(t, c, "wait until", c.WaitUntil(sig, 1, comm.CmpEQ, uint64(100+r)))
	}
	// Conditions that already hold return at once, for every comparison.
	final := uint64(rounds)
	for _, w := range []struct {
		cmp comm.Cmp
		v   uint64
	}{{comm.CmpEQ, final}, {comm.CmpNE, final + 1}, {comm.CmpGT, final - 1}, {comm.CmpGE, final}, {comm.CmpLT, final + 1}, {comm.CmpLE, final}} {
		must(t, c, fmt.Sprintf("wait until %d %d", w.cmp, w.v), c.WaitUntil(sig, 0, w.cmp, w.v))
	}
	must(t, c, "barrier", c.Barrier())
}

// FenceQuiet checks that Fence and Quiet succeed between puts and that the
// puts around them are all delivered.
func FenceQuiet(t *testing.T, c comm.Comm) {
	npes, me := c.NPEs(), c.MyPE()
	right, left := (me+1)%npes, (me+npes-1)%npes
	b := alloc(t, c, comm.Float32, 3)
	defer free(t, c, b)
	must(t, c, "put", c.PutFloat32(b, 0, []float32{float32(me), 1.5}, right))
	must(t, c, "fence", c.Fence())
	must(t, c, "p", c.P(b, 2, float32(me)+0.5, right))
	must(t, c, "quiet", c.Quiet())
	must(t, c, "barrier", c.Barrier())
	want := []float32{float32(left), 1.5, float32(left) + 0.5}
	checkEqual(t, c, "puts around fence and quiet", read(t, c, b, 0, 3), want)
	must(t, c, "barrier", c.Barrier())
}
