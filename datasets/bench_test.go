package datasets

import (
	"bytes"
	"testing"
)

// Speed targets on one core of the development machine: ReadIDX of the raw
// 60000x28x28 training images above 1 GB/s, so that loading is bound by
// gzip; Gather of a 256-row batch of 784 values under 100 µs for float32 rows
// (a copy) and under 150 µs for byte rows in random order (ByteSamples,
// decoded by table); a new epoch order of 60000 samples under 2 ms.

func BenchmarkReadIDX_60000x28x28(b *testing.B) {
	raw := encodeIDX([]int{60000, 28, 28}, ramp(60000*28*28))
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ReadIDX(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGather_256x784(b *testing.B) {
	d, err := Synthetic(1024, 784, 10, 1)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := NewShardSampler(d.Len(), 256, 1, 0, 1)
	idx := make([]int, 256)
	s.Batch(0, 0, idx)
	x := make([]float32, 256*784)
	y := make([]int32, 256)
	b.SetBytes(int64(len(x) * 4))
	for b.Loop() {
		d.Gather(idx, x, y)
	}
}

func BenchmarkEpochOrder_60000(b *testing.B) {
	s, _ := NewShardSampler(60000, 256, 1, 0, 1)
	dst := make([]int, 256)
	epoch := 0
	for b.Loop() {
		s.Batch(epoch, 0, dst)
		epoch++
	}
}

// BenchmarkGatherBytes_256x784 decodes the rows of one batch of a
// Fashion-MNIST-sized dataset (60000 rows of bytes, 47 MB, larger than the
// caches), a different batch of the epoch's random order every time.
func BenchmarkGatherBytes_256x784(b *testing.B) {
	const n = 60000
	y := make([]int32, n)
	d, err := NewByteSamples(ramp(n*784), y, []int{784}, 10)
	if err != nil {
		b.Fatal(err)
	}
	d.Normalize(0.2860, 0.3530)
	s, _ := NewShardSampler(d.Len(), 256, 1, 0, 1)
	idx := make([]int, 256)
	x := make([]float32, 256*784)
	b.SetBytes(int64(len(x) * 4))
	step := 0
	for b.Loop() {
		s.Batch(0, step%s.StepsPerEpoch(), idx)
		d.Gather(idx, x, y[:256])
		step++
	}
}

// BenchmarkGatherer_256x784 and BenchmarkGatherer_4096x784 gather batches
// of a Fashion-MNIST-sized training set (60000 rows of 784 values) in the
// epoch's random order, a different batch every time, as the device step
// path does into pinned memory: from bytes decoded by table (ByteSamples,
// what train loads) and from float32 rows (InMemory); in one GatherBatch
// call (serial) and split over a Gatherer's goroutines (parallel). A batch
// of 256 rows (0.8 MB) is below SplitBytes, so Gatherer would not split
// it: the parallel case forces the split there, to show what it would
// cost. Target: the parallel gather of 4096 rows at least 1.5x the serial
// one's speed with 2 or more cores.
func BenchmarkGatherer_256x784(b *testing.B)  { benchGatherer(b, 256) }
func BenchmarkGatherer_4096x784(b *testing.B) { benchGatherer(b, 4096) }

func benchGatherer(b *testing.B, rows int) {
	const n, dim = 60000, 784
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(i % 10)
	}
	by, err := NewByteSamples(ramp(n*dim), y, []int{dim}, 10)
	if err != nil {
		b.Fatal(err)
	}
	by.Normalize(0.2860, 0.3530)
	x := make([]float32, n*dim)
	for i := range x {
		x[i] = by.Value(byte(i))
	}
	fl, err := NewInMemory(x, y, []int{dim}, 10)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := NewShardSampler(n, rows, 1, 0, 1)
	idx := make([]int, rows)
	batch := Batch{X: make([]float32, rows*dim), Y: make([]int32, rows)}
	for _, src := range []struct {
		name string
		s    Source
	}{{"bytes", by}, {"float", fl}} {
		for _, parallel := range []bool{false, true} {
			name := src.name + "/serial"
			if parallel {
				name = src.name + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				g := NewGatherer(src.s.Spec())
				defer g.Close()
				if parallel {
					g.split = 0
				} else {
					g.maxParts = 1
				}
				b.SetBytes(int64(len(batch.X) * 4))
				step := 0
				for b.Loop() {
					s.Batch(0, step%s.StepsPerEpoch(), idx)
					g.Gather(src.s, idx, batch)
					step++
				}
			})
		}
	}
}
