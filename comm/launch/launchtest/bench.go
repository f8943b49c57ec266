package launchtest

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"

	"github.com/symddp/symddp/internal/settings"
)

// envBenchN carries the parent benchmark's b.N to the PEs.
const envBenchN = settings.LaunchTestN

// Bench runs body in job.NPEs PE processes as benchmark b: every PE runs
// body with the parent's b.N, and the parent reports PE 0's metrics (ns/op
// and whatever body reported with b.ReportMetric) as its own. The job's
// start-up is not in the reported ns/op, though the benchmark framework
// counts it when it picks b.N. Call Bench last in the benchmark function.
func Bench(b *testing.B, job Job, body func(b *testing.B, c comm.Comm)) {
	b.Helper()
	if InPE() {
		if settings.Get(envKey) != b.Name() {
			return
		}
		n, err := strconv.Atoi(settings.Get(envBenchN))
		if err != nil || n < 1 {
			b.Fatalf("launchtest: %s=%q", envBenchN, settings.Get(envBenchN))
		}
		runPE(b, func(c comm.Comm) {
			b.N = n
			body(b, c)
		})
		return
	}
	args := []string{"-test.run=^$", "-test.bench=" + exactPattern(b.Name()), "-test.benchtime=1x", "-test.count=1"}
	out, err := launchJob(b, job, b.Name(), args, []string{fmt.Sprintf("%s=%d", envBenchN, b.N)})
	if err != nil {
		b.Fatalf("job of %d PEs: %v\n---- output of the PEs ----\n%s", max(job.NPEs, 1), err, out)
	}
	metrics, ok := parseBenchLine(out, b.Name())
	if !ok {
		b.Fatalf("no result line for %s in PE 0's output:\n%s", b.Name(), out)
	}
	for _, m := range metrics {
		b.ReportMetric(m.value, m.unit)
	}
}

type metric struct {
	value float64
	unit  string
}

// parseBenchLine finds PE 0's result line of benchmark name, "name-P  N  v1
// unit1  v2 unit2 ..." (prefixed "[pe 0] " in a job of several PEs), and
// returns its metrics.
func parseBenchLine(out, name string) ([]metric, bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(sc.Text(), "[pe 0] "))
		if len(f) < 4 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		var ms []metric
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, false
			}
			ms = append(ms, metric{v, f[i+1]})
		}
		return ms, true
	}
	return nil, false
}
