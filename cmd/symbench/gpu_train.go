package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// The gpu-train subcommand: samples per second of the mlp's training step
// on the CUDA engine at one PE, eager and replayed from a CUDA graph.
func init() {
	register("gpu-train", "MLP training steps/s on the CUDA engine, eager and CUDA graph (needs libsymddp_cuda.so and a GPU)", runGPUTrain)
}

// trainConfig is one measured MLP and batch.
type trainConfig struct {
	hidden []int
	batch  int
}

func (c trainConfig) name() string {
	parts := []string{"784"}
	for _, h := range c.hidden {
		parts = append(parts, strconv.Itoa(h))
	}
	return strings.Join(append(parts, "10"), "-")
}

// flops is the arithmetic of one step's GEMMs: forward x·Wᵀ and the
// weight gradients for every layer, input gradients for all but the first.
func (c trainConfig) flops() float64 {
	dims := append(append([]int{784}, c.hidden...), 10)
	var all, first float64
	for i := 0; i+1 < len(dims); i++ {
		all += float64(dims[i] * dims[i+1])
	}
	first = float64(dims[0] * dims[1])
	return 2 * float64(c.batch) * (3*all - first)
}

// defaultTrainConfigs are the four: 784-256-256-10 at batch 256 and
// 4096, 784-1024x4-10 at 1024, 784-4096x4-10 at 4096.
var defaultTrainConfigs = []string{"256x2/256", "256x2/4096", "1024x4/1024", "4096x4/4096"}

// parseTrainConfig reads WIDTHxLAYERS/BATCH.
func parseTrainConfig(s string) (trainConfig, error) {
	var w, l, b int
	if _, err := fmt.Sscanf(s, "%dx%d/%d", &w, &l, &b); err != nil || w < 1 || l < 1 || b < 1 {
		return trainConfig{}, fmt.Errorf("config %q: want WIDTHxLAYERS/BATCH, e.g. 256x2/4096", s)
	}
	c := trainConfig{batch: b}
	for i := 0; i < l; i++ {
		c.hidden = append(c.hidden, w)
	}
	return c, nil
}

type gpuTrainOpts struct {
	configs []trainConfig
	modes   []string
	target  time.Duration
	warmup  int
	lib     string
	device  int
	// engine makes the engine of a measurement (tests: an emulated one).
	engine func() (*cuda.Engine, error)
}

func parseGPUTrainFlags(args []string) (gpuTrainOpts, error) {
	var o gpuTrainOpts
	fs := pflag.NewFlagSet("symbench gpu-train", pflag.ContinueOnError)
	cfgs := fs.StringSlice("configs", defaultTrainConfigs, "MLPs and batches as WIDTHxLAYERS/BATCH (hidden layers of WIDTH between 784 inputs and 10 classes)")
	fs.StringSliceVar(&o.modes, "modes", []string{"eager", "graph"}, "eager: kernels launched one by one; graph: the step replayed from a CUDA graph")
	fs.DurationVar(&o.target, "time", time.Second, "timed duration of each measurement (after the warm-up)")
	fs.IntVar(&o.warmup, "warmup", 20, "steps before timing")
	fs.StringVar(&o.lib, "lib", "", "path of libsymddp_cuda.so (default: $SYMDDP_CUDA_LIB, next to this binary, ./build)")
	fs.IntVar(&o.device, "device", -1, "GPU to use (-1: GPU 0)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range *cfgs {
		c, err := parseTrainConfig(s)
		if err != nil {
			return o, err
		}
		o.configs = append(o.configs, c)
	}
	for _, m := range o.modes {
		if m != "eager" && m != "graph" {
			return o, fmt.Errorf("--modes: %q, want eager or graph", m)
		}
	}
	if o.warmup < 2 || o.target <= 0 {
		return o, errors.New("--warmup must be at least 2 (one eager step, one capture) and --time positive")
	}
	o.engine = func() (*cuda.Engine, error) { return cuda.New(cuda.Options{LibPath: o.lib, Device: o.device}) }
	return o, nil
}

func runGPUTrain(args []string) error {
	o, err := parseGPUTrainFlags(args)
	if err != nil {
		return err
	}
	return gpuTrain(o, os.Stdout)
}

// trainResult is one configuration's measurements (samples/s by mode).
type trainResult struct {
	cfg    trainConfig
	rate   map[string]float64
	step   map[string]time.Duration
	loss   float64
	gpu    string
	fusion string // how the model's Linear layers ran (models.Sequential.Fusion)
	error  error
}

func gpuTrain(o gpuTrainOpts, w io.Writer) error {
	fmt.Fprintln(w, "gpu-train: MLP training step (forward, softmax cross-entropy, backward, SGD momentum 0.9 with the")
	fmt.Fprintln(w, "non-finite check) on the CUDA engine, one PE (no allreduce), fp32 GEMMs without TF32 (Linear layers")
	fmt.Fprintln(w, "fused into cuBLASLt epilogues unless "+cuda.FusedEnv+"=0; FUSION lines say per layer),")
	fmt.Fprintf(w, "synthetic batch resident in device memory; %d warm-up steps, then ~%v timed per measurement\n", o.warmup, o.target)
	var results []trainResult
	for _, c := range o.configs {
		r := benchTrain(o, c)
		results = append(results, r)
		if r.error != nil {
			fmt.Fprintf(w, "%s batch %d: %v\n", c.name(), c.batch, r.error)
		}
	}
	if len(results) > 0 && results[0].gpu != "" {
		fmt.Fprintf(w, "GPU: %s\n", results[0].gpu)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tbatch\teager samples/s\tgraph samples/s\tgraph step\tGEMM TFLOP/s\tloss\t")
	for _, r := range results {
		if r.error != nil {
			continue
		}
		best := r.step["graph"]
		if best == 0 {
			best = r.step["eager"]
		}
		tf := "-"
		if best > 0 {
			tf = fmt.Sprintf("%.1f", r.cfg.flops()/best.Seconds()/1e12)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.4f\t\n", r.cfg.name(), r.cfg.batch, rateCell(r.rate, "eager"),
			rateCell(r.rate, "graph"), stepCell(r.step["graph"]), tf, r.loss)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var failed error
	for _, r := range results {
		if r.error != nil {
			failed = errors.Join(failed, fmt.Errorf("%s batch %d: %w", r.cfg.name(), r.cfg.batch, r.error))
			continue
		}
		// One machine-readable line per configuration, for scripts.
		fmt.Fprintf(w, "RESULT symddp model=%s batch=%d eager=%.0f graph=%.0f\n", r.cfg.name(), r.cfg.batch, r.rate["eager"], r.rate["graph"])
	}
	for _, r := range results {
		if r.error == nil && r.fusion != "" {
			fmt.Fprintf(w, "FUSION model=%s batch=%d: %s\n", r.cfg.name(), r.cfg.batch, r.fusion)
		}
	}
	return failed
}

func rateCell(m map[string]float64, k string) string {
	if v, ok := m[k]; ok && v > 0 {
		return fmt.Sprintf("%.0f", v)
	}
	return "-"
}

func stepCell(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f us", float64(d.Nanoseconds())/1e3)
}

// benchTrain measures one configuration in every mode, on an engine of its
// own (closed at the end, so that the next configuration has the memory).
func benchTrain(o gpuTrainOpts, c trainConfig) (res trainResult) {
	res = trainResult{cfg: c, rate: map[string]float64{}, step: map[string]time.Duration{}}
	for _, mode := range o.modes {
		e, err := o.engine()
		if err != nil {
			res.error = err
			return res
		}
		res.gpu = e.Describe()
		b, err := newTrainBench(e, c)
		if err == nil {
			if f, ok := b.m.(interface{ Fusion() string }); ok {
				res.fusion = f.Fusion()
			}
			var per time.Duration
			per, res.loss, err = b.measure(mode == "graph", o.warmup, o.target)
			if err == nil {
				res.step[mode] = per
				res.rate[mode] = float64(c.batch) / per.Seconds()
			}
			b.close()
		}
		if cerr := e.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			res.error = fmt.Errorf("%s: %w", mode, err)
			return res
		}
	}
	return res
}

// trainBench is one model, optimizer and resident batch on an engine.
type trainBench struct {
	e     *cuda.Engine
	m     models.Network
	o     optim.Optimizer
	loss  *models.CrossEntropy
	x     compute.Tensor
	y     compute.Labels
	p, g  compute.Tensor
	graph *cuda.Graph
	steps int
	scale float32
}

const benchLR = 0.01

func newTrainBench(e *cuda.Engine, c trainConfig) (*trainBench, error) {
	m, err := models.MLP(models.Config{Hidden: c.hidden})
	if err != nil {
		return nil, err
	}
	o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	if err != nil {
		return nil, err
	}
	specs := m.Params()
	offsets, total := models.Layout(specs)
	host := make([]float32, total)
	dst := make([][]float32, len(specs))
	for i, s := range specs {
		dst[i] = host[offsets[i] : offsets[i]+s.Size()]
	}
	models.InitParams(specs, 1, dst)
	b := &trainBench{e: e, m: m, o: o, scale: 1 / float32(c.batch)}
	pa := compute.Arena{Dev: e.Alloc(total).(*cuda.Tensor).DevicePtr(), N: total}
	ga := compute.Arena{Dev: e.Alloc(total).(*cuda.Tensor).DevicePtr(), N: total}
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(pa, offsets[i], s.Shape...))
		gv = append(gv, e.View(ga, offsets[i], s.Shape...))
	}
	b.p, b.g = e.View(pa, 0, total), e.View(ga, 0, total)
	e.SetTensor(b.p, host)
	if err := m.Build(e, pv, gv, c.batch); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(1, 2))
	xs, ys := make([]float32, c.batch*784), make([]int32, c.batch)
	for i := range ys {
		ys[i] = int32(r.IntN(10))
		for j := 0; j < 784; j++ {
			xs[i*784+j] = float32(r.Float64())
		}
	}
	b.x, b.y = e.Alloc(c.batch, 784), e.AllocLabels(c.batch)
	e.SetTensor(b.x, xs)
	e.SetLabels(b.y, ys)
	b.loss = models.NewCrossEntropy(e, c.batch, 10)
	return b, e.Sync()
}

// work enqueues (or records) one step's device work.
func (b *trainBench) work() error {
	b.m.Backward(b.loss.Apply(b.m.Forward(b.x), b.y, b.scale), nil)
	return b.e.Update(b.o, b.p, b.g, b.steps, benchLR, 0)
}

// one runs the next step: eagerly, or from the graph (captured at the
// second step, after an eager one has allocated the optimizer state).
func (b *trainBench) one(graph bool) error {
	b.steps++
	if !graph || b.steps == 1 {
		return b.work()
	}
	if b.graph == nil {
		if err := b.e.BeginCapture(); err != nil {
			return err
		}
		werr := b.work()
		g, err := b.e.EndCapture()
		if werr != nil || err != nil {
			return errors.Join(werr, err)
		}
		b.graph = g
	}
	return b.graph.Launch(cuda.StepValues{LossScale: b.scale, Step: b.steps, LR: benchLR})
}

// measure warms up, then times enough steps to fill target, and returns the
// time per step and the mean loss of the last step.
func (b *trainBench) measure(graph bool, warmup int, target time.Duration) (time.Duration, float64, error) {
	run := func(n int) (time.Duration, error) {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := b.one(graph); err != nil {
				return 0, err
			}
		}
		err := b.e.Sync()
		return time.Since(t0), err
	}
	if _, err := run(warmup); err != nil {
		return 0, 0, err
	}
	n := 4
	for {
		d, err := run(n)
		if err != nil {
			return 0, 0, err
		}
		if d >= target/4 || n >= 1<<20 {
			n = max(1, int(float64(n)*target.Seconds()/d.Seconds()))
			break
		}
		n *= 4
	}
	d, err := run(n)
	if err != nil {
		return 0, 0, err
	}
	b.loss.Reset()
	if err := b.one(graph); err != nil {
		return 0, 0, err
	}
	loss, _, labelled := b.loss.Totals()
	return d / time.Duration(n), loss / float64(max(labelled, 1)), nil
}

func (b *trainBench) close() {
	if b.graph != nil {
		_ = b.graph.Close()
	}
}
