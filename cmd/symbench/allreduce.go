package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	_ "github.com/symddp/symddp/comm/shm"
)

// allReduceOpts are the flags of `symbench allreduce`.
type allReduceOpts struct {
	sizeSweep  // --min, --max, --step
	pes        []int
	reps       int
	target     time.Duration
	mpi        string
	mpirunArgs string
	format     string
	jsonOut    string // --json: the rows as JSON too (symbench all reads them)
	timeout    time.Duration
}

// result is the timing of one size: the median time per call over the
// repetitions, each the maximum over the PEs.
type result struct {
	bytes   int64
	iters   int
	seconds float64
}

func parseAllReduceFlags(args []string) (allReduceOpts, error) {
	var o allReduceOpts
	fs := pflag.NewFlagSet("symbench allreduce", pflag.ContinueOnError)
	fs.IntSliceVar(&o.pes, "pes", []int{2, 4, 8}, "job sizes (numbers of PEs, at least 2) to measure")
	minSize, maxSize := o.sweepFlags(fs, "64MiB")
	fs.StringVar(&o.mpi, "mpi", "auto", "measure Open MPI too: auto (if mpicc and mpirun are found), on, off")
	fs.StringVar(&o.mpirunArgs, "mpirun-args", "", "extra arguments for mpirun, such as \"--mca btl self,vader\"")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "deadline of every wait in the shm PEs")
	fs.StringVar(&o.jsonOut, "json", "", "also write the rows as JSON to this file (checked before the measurements start)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.check(*minSize, *maxSize); err != nil {
		return o, err
	}
	if o.mpi != "auto" && o.mpi != "on" && o.mpi != "off" {
		return o, fmt.Errorf("--mpi %q: want auto, on or off", o.mpi)
	}
	return o, nil
}

// allReduceJSON is what --json writes: every row of the table, bandwidths
// in GB/s (busbw), Open MPI's fields absent where it was not measured.
type allReduceJSON struct {
	Host string             `json:"host"`
	Note string             `json:"note,omitempty"`
	Rows []allReduceJSONRow `json:"rows"`
}

type allReduceJSONRow struct {
	PEs        int      `json:"pes"`
	Bytes      int64    `json:"bytes"`
	ShmSeconds float64  `json:"shm_seconds"`
	ShmBusBW   float64  `json:"shm_busbw_gbs"`
	MPISeconds *float64 `json:"mpi_seconds,omitempty"`
	MPIBusBW   *float64 `json:"mpi_busbw_gbs,omitempty"`
}

// allReduceRowsJSON turns the table's rows into what --json writes.
func allReduceRowsJSON(host, note string, rows []row) allReduceJSON {
	out := allReduceJSON{Host: host, Note: note, Rows: []allReduceJSONRow{}}
	for _, r := range rows {
		j := allReduceJSONRow{PEs: r.npes, Bytes: r.bytes, ShmSeconds: r.shm.seconds, ShmBusBW: busbw(r.bytes, r.npes, r.shm.seconds)}
		if r.mpi != nil {
			sec, bw := r.mpi.seconds, busbw(r.bytes, r.npes, r.mpi.seconds)
			j.MPISeconds, j.MPIBusBW = &sec, &bw
		}
		out.Rows = append(out.Rows, j)
	}
	return out
}

// busbwPoints are the rows of a --json file as the suite's figure takes
// them (Open MPI 0 where not measured).
func (a allReduceJSON) busbwPoints() ([]busbwPoint, error) {
	if len(a.Rows) == 0 {
		return nil, errors.New("no allreduce rows")
	}
	pts := make([]busbwPoint, 0, len(a.Rows))
	for _, r := range a.Rows {
		if r.PEs < 1 || r.Bytes <= 0 || !(r.ShmBusBW > 0) {
			return nil, fmt.Errorf("allreduce row %+v: want PEs, bytes and a shm busbw", r)
		}
		pt := busbwPoint{npes: r.PEs, bytes: r.Bytes, shm: r.ShmBusBW}
		if r.MPIBusBW != nil {
			pt.mpi = *r.MPIBusBW
		}
		pts = append(pts, pt)
	}
	return pts, nil
}

// sweepFlags declares on fs the flags that `symbench allreduce` and
// `symbench allreduce-mpi` share: the buffer sizes (--max defaults to
// maxDefault), the repetitions and the table format. It returns --min and
// --max for check.
func (o *allReduceOpts) sweepFlags(fs *pflag.FlagSet, maxDefault string) (minSize, maxSize *string) {
	minSize, maxSize = o.sizeFlags(fs, maxDefault)
	fs.IntVar(&o.reps, "reps", 5, "timed repetitions per size (the median is reported)")
	fs.DurationVar(&o.target, "target", 50*time.Millisecond, "duration of one repetition")
	fs.StringVar(&o.format, "format", "text", "table format: text or markdown")
	return minSize, maxSize
}

// check sets the buffer sizes from --min and --max and validates the
// options both allreduce commands have.
func (o *allReduceOpts) check(minSize, maxSize string) error {
	if err := o.setSizes(minSize, maxSize, 4); err != nil {
		return err
	}
	switch {
	case o.reps < 1 || o.target <= 0:
		return fmt.Errorf("--reps %d --target %v: want positive values", o.reps, o.target)
	case o.format != "text" && o.format != "markdown":
		return fmt.Errorf("--format %q: want text or markdown", o.format)
	}
	for _, n := range o.pes {
		if n < 2 {
			return fmt.Errorf("--pes %d: an allreduce needs at least 2 PEs (at 1 its bus bandwidth, bytes·2(N−1)/N / time, is 0)", n)
		}
	}
	return nil
}

// sizeSweep is the buffer sizes of a sweep: --min, --min times --step, and
// so on up to --max.
type sizeSweep struct {
	minBytes int64
	maxBytes int64
	step     int64
}

// sizeFlags declares --min, --max (defaulting to maxDefault) and --step on
// fs. It returns --min and --max for setSizes.
func (s *sizeSweep) sizeFlags(fs *pflag.FlagSet, maxDefault string) (minSize, maxSize *string) {
	minSize = fs.String("min", "4KiB", "smallest buffer (B, KiB, MiB, GiB)")
	maxSize = fs.String("max", maxDefault, "largest buffer")
	fs.Int64Var(&s.step, "step", 4, "factor between successive buffer sizes")
	return minSize, maxSize
}

// setSizes sets the sizes from --min and --max, multiples of align bytes,
// and checks --step.
func (s *sizeSweep) setSizes(minSize, maxSize string, align int64) error {
	var err error
	if s.minBytes, s.maxBytes, err = sizeRange(minSize, maxSize, align); err != nil {
		return err
	}
	if s.step < 2 {
		return fmt.Errorf("--step %d: want at least 2", s.step)
	}
	return nil
}

// sizes are the buffer sizes to measure, in bytes.
func (s sizeSweep) sizes() []int64 {
	var out []int64
	for b := s.minBytes; b <= s.maxBytes; b *= s.step {
		out = append(out, b)
	}
	return out
}

// sizeRange parses --min and --max: sizes that are multiples of align bytes,
// min <= max.
func sizeRange(minS, maxS string, align int64) (lo, hi int64, err error) {
	if lo, err = parseSize(minS); err != nil {
		return 0, 0, fmt.Errorf("--min: %w", err)
	}
	if hi, err = parseSize(maxS); err != nil {
		return 0, 0, fmt.Errorf("--max: %w", err)
	}
	if lo < align || lo%align != 0 || hi < lo {
		return 0, 0, fmt.Errorf("--min %s --max %s: want multiples of %d bytes, min <= max", minS, maxS, align)
	}
	return lo, hi, nil
}

// parseSize reads "4KiB", "64MiB", "1GiB" or a number of bytes.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("size %q: want a number with an optional B, KiB, MiB or GiB", s)
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("size %q", s)
}

func runAllReduce(args []string) error {
	opts, err := parseAllReduceFlags(args)
	if err != nil {
		return err
	}
	cfg, backend, isPE, err := comm.ConfigFromEnv()
	if err != nil {
		return err
	}
	if isPE {
		return allReducePE(cfg, backend, opts)
	}
	if opts.jsonOut != "" {
		// an unwritable path fails now, not after the measurements; an
		// existing file keeps its contents until the new rows replace them,
		// and a new one is not left behind by a run that fails
		_, statErr := os.Stat(opts.jsonOut)
		f, err := os.OpenFile(opts.jsonOut, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("--json: %w", err)
		}
		f.Close()
		if errors.Is(statErr, os.ErrNotExist) {
			os.Remove(opts.jsonOut)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var mpi *mpiRunner
	note := ""
	if opts.mpi != "off" {
		mpi, err = newMPIRunner(opts.mpirunArgs)
		if err != nil && opts.mpi == "on" {
			return err
		}
		if err != nil {
			note = fmt.Sprintf("Open MPI not measured: %v", err)
		}
		defer mpi.close()
	} else {
		note = "Open MPI not measured (--mpi=off)"
	}
	date, load0 := time.Now().Format("2006-01-02 15:04 MST"), loadAverage()
	var rows []row
	for _, n := range opts.pes {
		fmt.Fprintf(os.Stderr, "symbench: shm, %d PEs\n", n)
		shm, err := shmAllReduce(ctx, n, opts)
		if err != nil {
			return fmt.Errorf("shm with %d PEs: %w", n, err)
		}
		var ref map[int64]result
		if mpi != nil {
			fmt.Fprintf(os.Stderr, "symbench: Open MPI, %d ranks\n", n)
			if ref, err = mpi.allReduce(ctx, n, opts); err != nil {
				return fmt.Errorf("Open MPI with %d ranks: %w", n, err)
			}
		}
		for _, size := range opts.sizes() {
			r := row{npes: n, bytes: size, shm: shm[size]}
			if m, ok := ref[size]; ok {
				r.mpi = &m
			}
			rows = append(rows, r)
		}
	}
	host := describeHost(mpi)
	if opts.jsonOut != "" {
		b, err := json.MarshalIndent(allReduceRowsJSON(host, note, rows), "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(opts.jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	return printTable(os.Stdout, opts, host, measuredLine(date, load0, loadAverage()), rows, note)
}

// measuredLine says when the runs were made and how busy the host was: the
// 1-minute load average before and after them, and above quietLoad before
// that the times are not a clean measurement.
func measuredLine(date string, before, after float64) string {
	line := fmt.Sprintf("%s; 1-minute load average %.2f before the runs, %.2f after", date, before, after)
	if before > quietLoad {
		line += fmt.Sprintf(" (above %.1f before: other work ran, so the times are not a clean measurement)", quietLoad)
	}
	return line
}

// shmAllReduce runs the shm measurement in a job of n PEs of this binary and
// returns PE 0's results by size.
func shmAllReduce(ctx context.Context, n int, opts allReduceOpts) (map[int64]result, error) {
	var out bytes.Buffer
	err := launch.Run(ctx, launch.Spec{
		NPEs:     n,
		Backend:  "shm",
		HeapSize: opts.maxBytes + 1<<20,
		Timeout:  opts.timeout,
		Stdout:   &out,
	})
	if err != nil {
		return nil, err
	}
	res, err := parseResults(out.String(), "[pe 0] ")
	if err != nil {
		return nil, err
	}
	if len(res) != len(opts.sizes()) {
		return nil, fmt.Errorf("%d results for %d sizes in the PEs' output:\n%s", len(res), len(opts.sizes()), out.String())
	}
	return res, nil
}

// parseResults reads the lines "result <bytes> <iters> <seconds>" (after an
// optional prefix) of out.
func parseResults(out, prefix string) (map[int64]result, error) {
	res := map[int64]result{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), prefix)
		if !strings.HasPrefix(line, "result ") {
			continue
		}
		var r result
		if _, err := fmt.Sscanf(line, "result %d %d %g", &r.bytes, &r.iters, &r.seconds); err != nil {
			return nil, fmt.Errorf("bad result line %q: %w", line, err)
		}
		res[r.bytes] = r
	}
	return res, nil
}
