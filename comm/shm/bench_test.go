package shm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/internal/units"
)

// BenchmarkAllReduce measures an in-place float32 Sum AllReduce in jobs of
// 2, 4 and 8 PE processes, for 4 KiB to 64 MiB buffers, and reports the bus
// bandwidth: bytes·2(N−1)/N per second. Each PE process runs the loop; PE 0's
// timing is reported. For a table beside Open MPI, run
// `go run ./cmd/symbench allreduce`.
func BenchmarkAllReduce(b *testing.B) {
	for _, npes := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("N=%d", npes), func(b *testing.B) {
			for size := 4 << 10; size <= 64<<20; size *= 4 {
				b.Run(sizeName(size), func(b *testing.B) {
					launchtest.Bench(b, launchtest.Job{NPEs: npes}, func(b *testing.B, c comm.Comm) {
						benchAllReduce(b, c, size/4)
					})
				})
			}
		})
	}
}

func benchAllReduce(b *testing.B, c comm.Comm, n int) {
	buf, err := c.Alloc(comm.Float32, n)
	if err != nil {
		b.Fatal(err)
	}
	for i := range buf.(comm.HostBuffer).Float32s() {
		buf.(comm.HostBuffer).Float32s()[i] = 1
	}
	if err := c.Barrier(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.AllReduce(buf, 0, n, comm.Sum); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	npes := float64(c.NPEs())
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(4*n)*2*(npes-1)/npes/perOp/1e9, "busbw-GB/s")
}

// sizeName writes a byte count the way the tables do: 4KiB, 1MiB.
func sizeName(bytes int) string { return strings.ReplaceAll(units.Bytes(int64(bytes)), " ", "") }

// BenchmarkDesyncCheck measures what the desync check costs a Barrier and
// a 4 KiB AllReduce in a job of 2 PEs, with the check on and off
// (SYMDDP_DESYNC_CHECK): latency-bound collectives, where its few atomic
// stores and loads weigh most.
func BenchmarkDesyncCheck(b *testing.B) {
	for _, check := range []string{"on", "off"} {
		job := launchtest.Job{NPEs: 2, Env: []string{comm.EnvDesyncCheck + "=" + check}}
		b.Run("check="+check, func(b *testing.B) {
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
				launchtest.Bench(b, job, func(b *testing.B, c comm.Comm) { benchAllReduce(b, c, 1024) })
			})
		})
	}
}

// BenchmarkDesyncCheckOnePE measures the check's own work, without a peer
// to wait for: a Barrier of a one-PE runtime, where the barrier is one
// atomic add, with the check on and off. The difference is what the check
// adds to every collective (plus one line's loads per further PE).
func BenchmarkDesyncCheckOnePE(b *testing.B) {
	for _, check := range []string{"on", "off"} {
		b.Run("check="+check, func(b *testing.B) {
			b.Setenv(comm.EnvDesyncCheck, check)
			c, err := comm.Open("shm", comm.Config{NPEs: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.Barrier(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
