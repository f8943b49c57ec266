package ddp

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ReplicaReport is the outcome of a replica check: the hash of the
// parameter arena on every PE.
type ReplicaReport struct {
	Step      int      // optimizer steps done when checked
	Hashes    []uint64 // FNV-1a of the parameter arena's bits, by PE
	Identical bool     // every PE's hash equals PE 0's
}

// String summarises the report in one line.
func (r ReplicaReport) String() string {
	if len(r.Hashes) == 0 {
		return "replica check: not run"
	}
	if r.Identical {
		on := fmt.Sprintf("all %d PEs", len(r.Hashes))
		switch len(r.Hashes) {
		case 1:
			return fmt.Sprintf("one replica, on 1 PE (step %d, parameter hash %016x)", r.Step, r.Hashes[0])
		case 2:
			on = "both PEs"
		}
		return fmt.Sprintf("replicas identical on %s (step %d, parameter hash %016x)", on, r.Step, r.Hashes[0])
	}
	var bad []int
	for pe, h := range r.Hashes {
		if h != r.Hashes[0] {
			bad = append(bad, pe)
		}
	}
	return fmt.Sprintf("REPLICAS DIFFER at step %d: PEs %v do not match PE 0 (hashes %016x)", r.Step, bad, r.Hashes)
}

// CheckReplicas hashes this PE's parameter arena and compares the hashes of
// all PEs. It is collective. The error is for communication failures; a
// mismatch is reported in the result.
func (t *Trainer) CheckReplicas() (ReplicaReport, error) {
	t.mustBeOpen()
	all, err := t.gatherWords(hashFloat32s(t.Params()))
	if err != nil {
		return ReplicaReport{}, fmt.Errorf("replica check: %w", err)
	}
	r := ReplicaReport{Step: t.step, Hashes: make([]uint64, t.c.NPEs()), Identical: true}
	for pe := range r.Hashes {
		r.Hashes[pe] = all[pe]
		if r.Hashes[pe] != r.Hashes[0] {
			r.Identical = false
		}
	}
	return r, nil
}

// gatherWords gives every PE each PE's v, in PE order, through the hashes
// buffer (collective).
func (t *Trainer) gatherWords(v uint64) ([]uint64, error) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	me := t.c.MyPE()
	for pe := 0; pe < t.c.NPEs(); pe++ {
		if err := t.c.PutBytes(t.hashes, 8*me, b[:], pe); err != nil {
			return nil, err
		}
	}
	if err := t.c.Barrier(); err != nil {
		return nil, err
	}
	raw := make([]byte, 8*t.c.NPEs())
	if err := t.c.GetBytes(raw, t.hashes, 0, me); err != nil {
		return nil, err
	}
	// Nobody may overwrite the words until everyone has read them.
	if err := t.c.Barrier(); err != nil {
		return nil, err
	}
	out := make([]uint64, t.c.NPEs())
	for pe := range out {
		out[pe] = binary.LittleEndian.Uint64(raw[8*pe:])
	}
	return out, nil
}

// deviceBytes is implemented by device engines that count the device
// memory they have allocated (compute/cuda).
type deviceBytes interface{ DeviceBytes() int64 }

// gatherDeviceBytes returns each PE's engine device memory (nil for host
// engines; collective).
func (t *Trainer) gatherDeviceBytes() ([]int64, error) {
	d, ok := t.e.(deviceBytes)
	if !ok {
		return nil, nil
	}
	all, err := t.gatherWords(uint64(d.DeviceBytes()))
	if err != nil {
		return nil, fmt.Errorf("device memory report: %w", err)
	}
	out := make([]int64, len(all))
	for i, w := range all {
		out[i] = int64(w)
	}
	return out, nil
}

// hashFloat32s is FNV-1a over the bit patterns of s, one 32-bit word at a
// time: equal arenas hash equal, and any flipped bit changes the hash.
func hashFloat32s(s []float32) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, v := range s {
		h ^= uint64(math.Float32bits(v))
		h *= prime
	}
	return h
}
