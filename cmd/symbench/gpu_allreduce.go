package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/comm/nvshmem"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/units"
)

// The gpu-allreduce subcommand: the nvshmem backend's fused allreduce on the
// GPU, timed with CUDA events inside the PEs.
func init() {
	register("gpu-allreduce", "fused GPU allreduce of the nvshmem backend (needs libsymddp_cuda.so and a GPU)", runGPUAllReduce)
}

// peakHBM is the H200's device-to-device copy bandwidth the issue measures
// against (GPU-HOST.md), in bytes per second.
const peakHBM = 4.3e12

// gpuOpts are the flags of `symbench gpu-allreduce`.
type gpuOpts struct {
	sizeSweep  // --min, --max, --step
	pes        []int
	dtype      string
	algos      []string
	nvshmem    bool
	nvshmemMax int64
	target     time.Duration
	lib        string
	timeout    time.Duration
	format     string
	results    string // --results: append RESULT lines (see resultLines) to this file
}

func parseGPUFlags(args []string) (gpuOpts, error) {
	var o gpuOpts
	fs := pflag.NewFlagSet("symbench gpu-allreduce", pflag.ContinueOnError)
	fs.IntSliceVar(&o.pes, "pes", []int{1}, "job sizes (PEs; several PEs share the GPUs, PE i on GPU i mod GPUs)")
	minSize, maxSize := o.sizeFlags(fs, "1GiB")
	fs.StringVar(&o.dtype, "dtype", "f32", "element type: f32 or bf16")
	fs.StringSliceVar(&o.algos, "algos", []string{"auto", "one-shot", "two-shot"}, "algorithms: auto, one-shot, two-shot")
	fs.BoolVar(&o.nvshmem, "nvshmem", false, "also time NVSHMEM's own on-stream reduction (needs MPS when PEs share a GPU, else NVSHMEM aborts)")
	nvMax := fs.String("nvshmem-max", "16MiB", "largest buffer for the NVSHMEM reduction")
	fs.DurationVar(&o.target, "target", 20*time.Millisecond, "GPU time of one measurement")
	fs.StringVar(&o.lib, "lib", "", "path of libsymddp_cuda.so (default: $SYMDDP_CUDA_LIB, next to this binary, ./build)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "deadline of every wait in the PEs")
	fs.StringVar(&o.format, "format", "text", "table format: text or markdown")
	fs.StringVar(&o.results, "results", "", "also append one line per size of every job of several PEs to this file, in the NCCL reference script's form (RESULT symddp pes=N bytes=B time_us=T busbw_gbs=X; algorithm auto)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.setSizes(*minSize, *maxSize, 16); err != nil {
		return o, err
	}
	var err error
	if o.nvshmemMax, err = parseSize(*nvMax); err != nil {
		return o, fmt.Errorf("--nvshmem-max: %w", err)
	}
	switch {
	case o.dtype != "f32" && o.dtype != "bf16":
		return o, fmt.Errorf("--dtype %q: want f32 or bf16", o.dtype)
	case o.target <= 0:
		return o, fmt.Errorf("--target %v: want a positive duration", o.target)
	case o.format != "text" && o.format != "markdown":
		return o, fmt.Errorf("--format %q: want text or markdown", o.format)
	}
	for _, a := range o.algos {
		if _, err := nvshmem.ParseAlgo(a); err != nil || a == "nvshmem" {
			return o, fmt.Errorf("--algos: %q: want auto, one-shot or two-shot (and --nvshmem for NVSHMEM's reduction)", a)
		}
	}
	for _, n := range o.pes {
		if n < 1 {
			return o, fmt.Errorf("--pes: %d PEs", n)
		}
	}
	return o, nil
}

func (o gpuOpts) kind() comm.Kind {
	if o.dtype == "bf16" {
		return comm.BFloat16
	}
	return comm.Float32
}

// gpuResult is one timing a PE 0 reported.
type gpuResult struct {
	what    string // an algorithm, "copy" or "barrier"
	bytes   int64
	iters   int
	seconds float64 // per call
}

func runGPUAllReduce(args []string) error {
	opts, err := parseGPUFlags(args)
	if err != nil {
		return err
	}
	cfg, _, isPE, err := comm.ConfigFromEnv()
	if err != nil {
		return err
	}
	if isPE {
		return gpuAllReducePE(cfg, opts)
	}
	lib, err := cudalib.Load(opts.lib)
	if err != nil {
		return err
	}
	if _, err := lib.DeviceCount(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, n := range opts.pes {
		fmt.Fprintf(os.Stderr, "symbench: nvshmem, %d PEs\n", n)
		var out bytes.Buffer
		err := launch.Run(ctx, launch.Spec{
			NPEs:     n,
			Backend:  nvshmem.Name,
			Env:      []string{cudalib.EnvLib + "=" + lib.Path(), "NVSHMEM_DISABLE_NVLS=1"},
			HeapSize: opts.maxBytes + 16<<20,
			Timeout:  opts.timeout,
			Stdout:   &out,
		})
		if err != nil {
			return fmt.Errorf("%d PEs: %w\n%s", n, err, out.String())
		}
		info, res, err := parseGPUResults(out.String())
		if err != nil {
			return err
		}
		if err := printGPUTable(os.Stdout, opts, n, info, res); err != nil {
			return err
		}
		if opts.results != "" && n > 1 {
			if err := appendFile(opts.results, resultLines(n, res)); err != nil {
				return fmt.Errorf("--results: %w", err)
			}
		}
	}
	return nil
}

// resultLines are the results of algorithm auto of a job of n PEs as lines
// "RESULT symddp pes=N bytes=B time_us=T busbw_gbs=X", the form of the NCCL
// script's lines, so that `symbench all` can put them side by side.
func resultLines(n int, res []gpuResult) string {
	var b strings.Builder
	for _, r := range res {
		if r.what != "auto" {
			continue
		}
		fmt.Fprintf(&b, "RESULT symddp pes=%d bytes=%d time_us=%.2f busbw_gbs=%.3f\n",
			n, r.bytes, r.seconds*1e6, busbw(r.bytes, n, r.seconds))
	}
	return b.String()
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// parseGPUResults reads PE 0's lines "gpuinfo <text>" and
// "gpuresult <what> <bytes> <iters> <seconds>".
func parseGPUResults(out string) (string, []gpuResult, error) {
	var info string
	var res []gpuResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "[pe 0] ")
		if s, ok := strings.CutPrefix(line, "gpuinfo "); ok {
			info = s
			continue
		}
		if !strings.HasPrefix(line, "gpuresult ") {
			continue
		}
		var r gpuResult
		if _, err := fmt.Sscanf(line, "gpuresult %s %d %d %g", &r.what, &r.bytes, &r.iters, &r.seconds); err != nil {
			return "", nil, fmt.Errorf("bad result line %q: %w", line, err)
		}
		res = append(res, r)
	}
	if len(res) == 0 {
		return "", nil, fmt.Errorf("no results in the PEs' output:\n%s", out)
	}
	return info, res, nil
}

// printGPUTable prints the results of a job of npes PEs: per size and
// algorithm the time per call and the bandwidth; on one PE against the
// card's copy bandwidth (measured, and the nominal 4.3 TB/s), on several
// the aggregate 2·N·S/t and the speedup over NVSHMEM's reduction.
func printGPUTable(w io.Writer, o gpuOpts, npes int, info string, res []gpuResult) error {
	fmt.Fprintf(w, "\nallreduce, %s sum in place, %d PE(s): %s\n", o.dtype, npes, info)
	copies := map[int64]float64{}
	nv := map[int64]float64{}
	for _, r := range res {
		switch r.what {
		case "copy":
			copies[r.bytes] = r.seconds
		case "nvshmem":
			nv[r.bytes] = r.seconds
		case "barrier":
			fmt.Fprintf(w, "barrier of %d PE(s): %s (%d calls)\n", npes, formatTime(r.seconds), r.iters)
		}
	}
	var head []string
	if npes == 1 {
		fmt.Fprintf(w, "bandwidth = bytes read + written = 2·S / time; copy = cudaMemcpy device to device of S bytes, 2·S / time; peak %.1f TB/s\n", peakHBM/1e12)
		head = []string{"size", "algo", "iters", "time", "bandwidth", "of copy", "of peak", "copy bw"}
	} else {
		fmt.Fprintf(w, "aggregate bandwidth = 2·N·S / time (the memory traffic of a two-shot allreduce on one GPU)\n")
		fmt.Fprintf(w, "busbw = S·2(N−1)/N / time (nccl-tests' bus bandwidth, to compare with NCCL)\n")
		head = []string{"size", "algo", "iters", "time", "aggregate bw", "busbw", "NVSHMEM time", "speedup"}
	}
	var lines [][]string
	for _, r := range res {
		if r.what == "copy" || r.what == "barrier" || r.what == "nvshmem" {
			continue
		}
		bw := 2 * float64(r.bytes) * float64(npes) / r.seconds
		line := []string{units.Bytes(r.bytes), r.what, fmt.Sprint(r.iters), formatTime(r.seconds), formatRate(bw)}
		if npes == 1 {
			line = append(line, "-", fmt.Sprintf("%.0f%%", 100*bw/peakHBM), "-")
			if c, ok := copies[r.bytes]; ok {
				cbw := 2 * float64(r.bytes) / c
				line[5], line[7] = fmt.Sprintf("%.0f%%", 100*bw/cbw), formatRate(cbw)
			}
		} else {
			line = append(line, formatRate(busbw(r.bytes, npes, r.seconds)*1e9), "-", "-")
			if t, ok := nv[r.bytes]; ok && r.what == "auto" {
				line[6], line[7] = formatTime(t), fmt.Sprintf("%.1f×", t/r.seconds)
			}
		}
		lines = append(lines, line)
	}
	fmt.Fprintln(w)
	return writeTable(w, o.format, 3, head, lines)
}

func formatRate(bps float64) string {
	if bps >= 1e12 {
		return fmt.Sprintf("%.2f TB/s", bps/1e12)
	}
	return fmt.Sprintf("%.1f GB/s", bps/1e9)
}
