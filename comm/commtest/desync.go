package commtest

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
)

// DesyncCase is one check that PEs calling different collectives all fail
// at once with an error wrapping comm.ErrDesync, whose message names the odd
// PE (PE 1), the others and both calls. A desync leaves the runtime
// unusable, so each case needs a job of its own, of at least 2 PEs, on a
// backend that checks for desync; give the job a long deadline, so that a
// missed desync shows as a timeout, not a pass:
//
//	for _, dc := range commtest.DesyncCases {
//		t.Run(dc.Name, func(t *testing.T) {
//			launchtest.Run(t, launchtest.Job{NPEs: 3, Timeout: time.Minute}, dc.Run)
//		})
//	}
type DesyncCase struct {
	Name string
	// Run runs the case in every PE of the job.
	Run func(t *testing.T, c comm.Comm)
}

// desyncLen is the length of the buffers the cases reduce.
const desyncLen = 1024

// DesyncCases are the desync checks: PE 1 calls Barrier where the others
// call AllReduce; AllReduce of another length; of another buffer;
// Broadcast from another root; Alloc where the others call Barrier.
var DesyncCases = []DesyncCase{
	{"BarrierVsAllReduce", func(t *testing.T, c comm.Comm) {
		desyncCase(t, c, func(b, _ comm.Buffer) error {
			if c.MyPE() == 1 {
				return c.Barrier()
			}
			return c.AllReduce(b, 0, desyncLen, comm.Sum)
		}, `barrier\(\)`, `allreduce\(sum, 4096 bytes: float32 \[0, 1024\) of buffer #\d+\)`)
	}},
	{"AllReduceLengths", func(t *testing.T, c comm.Comm) {
		desyncCase(t, c, func(b, _ comm.Buffer) error {
			n := desyncLen
			if c.MyPE() == 1 {
				n = desyncLen - 1
			}
			return c.AllReduce(b, 0, n, comm.Sum)
		}, `allreduce\(sum, 4092 bytes: float32 \[0, 1023\) of buffer #\d+\)`,
			`allreduce\(sum, 4096 bytes: float32 \[0, 1024\) of buffer #\d+\)`)
	}},
	{"AllReduceBuffers", func(t *testing.T, c comm.Comm) {
		desyncCase(t, c, func(b, b2 comm.Buffer) error {
			if c.MyPE() == 1 {
				b = b2
			}
			return c.AllReduce(b, 0, desyncLen, comm.Sum)
		}, `allreduce\(sum, 4096 bytes: float32 \[0, 1024\) of buffer #(\d+)\)`,
			`allreduce\(sum, 4096 bytes: float32 \[0, 1024\) of buffer #(\d+)\)`)
	}},
	{"BroadcastRoots", func(t *testing.T, c comm.Comm) {
		desyncCase(t, c, func(b, _ comm.Buffer) error {
			root := 0
			if c.MyPE() == 1 {
				root = 1
			}
			return c.Broadcast(b, 0, desyncLen, root)
		}, `broadcast\(root 1, 4096 bytes: float32 \[0, 1024\) of buffer #\d+\)`,
			`broadcast\(root 0, 4096 bytes: float32 \[0, 1024\) of buffer #\d+\)`)
	}},
	{"AllocVsBarrier", func(t *testing.T, c comm.Comm) {
		desyncCase(t, c, func(_, _ comm.Buffer) error {
			if c.MyPE() == 1 {
				_, err := c.Alloc(comm.Float32, desyncLen)
				return err
			}
			return c.Barrier()
		}, `alloc\(\)`, `barrier\(\)`)
	}},
}

// desyncCase allocates two buffers, runs one matched allreduce (which must
// pass), then call, which must fail on every PE with comm.ErrDesync and a
// message in which PE 1 calls odd and the others call others (regular
// expressions); a later Barrier must fail at once too.
func desyncCase(t *testing.T, c comm.Comm, call func(b, b2 comm.Buffer) error, odd, others string) {
	if c.NPEs() < 2 {
		t.Skip("needs at least 2 PEs")
	}
	me := c.MyPE()
	b := alloc(t, c, comm.Float32, desyncLen)
	b2 := alloc(t, c, comm.Float32, desyncLen)
	fill(t, c, b, 0, values(0xd5, me, 0, desyncLen))
	must(t, c, "matched allreduce", c.AllReduce(b, 0, desyncLen, comm.Sum))

	err := call(b, b2)
	if !errors.Is(err, comm.ErrDesync) || errors.Is(err, comm.ErrTimeout) {
		t.Fatalf("PE %d: the mismatched call returned %v, want an error wrapping %q", me, err, comm.ErrDesync)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("PE %d: the error has more than one line: %q", me, msg)
	}
	var rest []string
	for q := 0; q < c.NPEs(); q++ {
		if q != 1 {
			rest = append(rest, fmt.Sprint(q))
		}
	}
	othersPEs := "PE 0 calls "
	if len(rest) > 1 {
		othersPEs = "PEs " + strings.Join(rest, ", ") + " call "
	}
	// PE 0's call comes first.
	want := regexp.MustCompile(`collective #\d+: ` + othersPEs + others + `; PE 1 calls ` + odd + `: `)
	m := want.FindStringSubmatch(msg)
	if m == nil {
		t.Errorf("PE %d: the error\n\t%s\ndoes not match\n\t%s", me, msg, want)
	} else if len(m) == 3 && m[1] == m[2] {
		t.Errorf("PE %d: the error names buffer #%s for both calls: %s", me, m[1], msg)
	}
	if err := c.Barrier(); !errors.Is(err, comm.ErrDesync) {
		t.Errorf("PE %d: a barrier after the desync returned %v, want the desync again", me, err)
	}
}
