package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/symddp/symddp/models"
)

// gptMetricsLog is train's --metrics log of `train --pes 2 --model gpt-tiny
// --batch-size 16 --max-steps 12 --log-every 4 ...` as recorded.
const gptMetricsLog = `{"accuracy":0.1700439453125,"elapsed":0.867798682,"epoch":0,"loss":5.022098541259766,"lr":0.0008535534,"samples_per_sec":73.74982392517623,"step":4}
{"accuracy":0.1729736328125,"elapsed":1.748564597,"epoch":0,"loss":4.647653579711914,"lr":0.00037059048,"samples_per_sec":72.66402901161315,"step":8}
{"accuracy":0.1893310546875,"elapsed":2.784578336,"epoch":0,"loss":4.49213981628418,"lr":0.000017037088,"samples_per_sec":61.77524253855479,"step":12}
{"elapsed":2.784679586,"final":true,"replicas_identical":true,"samples_per_sec":68.948686579699,"step":12,"test_accuracy":0.132373046875,"test_loss":4.567915725708008}
`

// torchGPTOutput is the stdout of bench/torch_gpt_cpu_bench.py --ranks
// 1,2 --steps 5 --warmup 2 as recorded.
const torchGPTOutput = `# torch 1.13.0a0, model gpt-tiny {'layers': 4, 'heads': 4, 'width': 128, 'context': 128, 'vocab': 256}, 842496 parameters, 2 CPUs
torch-gpt model=gpt-tiny params=842496 ranks=1 batch_per_rank=8 context=128 steps=5 tokens_per_s=910.8 ms_per_step=1124.3 loss=5.1202 peak_rss_mib=356.3
torch-gpt model=gpt-tiny params=842496 ranks=2 batch_per_rank=8 context=128 steps=5 tokens_per_s=938.7 ms_per_step=2181.7 loss=5.2394 peak_rss_mib=373.7,362.7
`

// torchLlamaOutput is the stdout of bench/torch_gpt_cpu_bench.py --model
// llama-tiny --ranks 2 --warmup 1 --steps 2 --expect-params 803968 as
// recorded.
const torchLlamaOutput = `# torch 1.13.0a0, model llama-tiny {'layers': 4, 'width': 128, 'heads': 4, 'kv_heads': 2, 'ffn': 0, 'multiple': 32, 'multiplier': 0.0, 'context': 128, 'vocab': 256, 'rope_theta': 10000, 'tied': False}, 803968 parameters, 2 CPUs
torch-gpt model=llama-tiny params=803968 ranks=2 batch_per_rank=8 context=128 steps=2 tokens_per_s=6811.2 ms_per_step=300.7 loss=5.5755 peak_rss_mib=391.1,392.5
`

// TestGPTTokensPerSec: tokens/s are the window's sequences times the
// context of 128, counted from the log at step 4 to the log at step 12.
func TestGPTTokensPerSec(t *testing.T) {
	tps, step, err := gptTokensPerSec([]byte(gptMetricsLog), 128, 4, 12)
	if err != nil {
		t.Fatal(err)
	}
	seqs := 72.66402901161315*(1.748564597-0.867798682) + 61.77524253855479*(2.784578336-1.748564597)
	d := 2.784578336 - 0.867798682
	if want := seqs / d * 128; math.Abs(tps-want) > 1e-6 || math.Abs(tps-8547.67) > 0.01 {
		t.Errorf("tokens/s %v, want %v", tps, want)
	}
	if want := d / 8; math.Abs(step-want) > 1e-12 {
		t.Errorf("step %v s, want %v", step, want)
	}
	if _, _, err := gptTokensPerSec([]byte(gptMetricsLog), 128, 4, 20); err == nil {
		t.Error("a window past the log's end was accepted")
	}
}

func TestParseTorchGPTOutput(t *testing.T) {
	lines, version, err := parseTorchGPTOutput(torchGPTOutput)
	if err != nil {
		t.Fatal(err)
	}
	if version != "1.13.0a0" {
		t.Errorf("version %q", version)
	}
	want := []torchGPTLine{
		{Model: "gpt-tiny", Params: 842496, Ranks: 1, BatchPerRank: 8, Context: 128, Steps: 5, TokensPerSec: 910.8, MsPerStep: 1124.3, Loss: 5.1202, PeakRSSMiB: []float64{356.3}},
		{Model: "gpt-tiny", Params: 842496, Ranks: 2, BatchPerRank: 8, Context: 128, Steps: 5, TokensPerSec: 938.7, MsPerStep: 2181.7, Loss: 5.2394, PeakRSSMiB: []float64{373.7, 362.7}},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("parsed %+v\nwant %+v", lines, want)
	}
	line2 := strings.Split(torchGPTOutput, "\n")[2]
	for name, bad := range map[string]string{
		"missing field": strings.Replace(line2, "tokens_per_s=938.7 ", "", 1),
		"bad number":    strings.Replace(line2, "tokens_per_s=938.7", "tokens_per_s=fast", 1),
		"rss per rank":  strings.Replace(line2, "=373.7,362.7", "=373.7", 1),
		"not key=value": line2 + " oops",
	} {
		if _, _, err := parseTorchGPTOutput(bad); err == nil {
			t.Errorf("%s: %q was accepted", name, bad)
		}
	}
	if lines, _, err := parseTorchGPTOutput("Traceback...\n"); err != nil || len(lines) != 0 {
		t.Errorf("output without results: %v, %v", lines, err)
	}
}

// gptTestReport is a report built from the recorded lines: 1 and 2 PEs,
// PyTorch at both, and a third PE count without PyTorch.
func gptTestReport(t *testing.T) gptCPUReport {
	t.Helper()
	torch, version, err := parseTorchGPTOutput(torchGPTOutput)
	if err != nil {
		t.Fatal(err)
	}
	tps, _, err := gptTokensPerSec([]byte(gptMetricsLog), 128, 4, 12)
	if err != nil {
		t.Fatal(err)
	}
	mem := func(hwm, pss int64) map[int]peMemory {
		return map[int]peMemory{0: {HWM: hwm, PSS: pss}, 1: {HWM: hwm / 2, PSS: pss / 2}}
	}
	return gptCPUReport{Model: "gpt-tiny", Context: 128, Params: 842496, Engine: "shm, cpu/openblas", PerPE: 8, Warmup: 4, Steps: 8, Reps: 1, CPUs: 2,
		Torch: true, TorchVersion: version, TorchParams: 842496,
		Rows: []gptCPURow{
			{PEs: 1, Ours: []gptTrainRun{{Run: cpuTrainRun{Params: 842496, Memory: mem(100<<20, 90<<20)}, TokensPerSec: 1400}}, Torch: torch[:1]},
			{PEs: 2, Ours: []gptTrainRun{{Run: cpuTrainRun{Params: 842496, Memory: mem(80<<20, 50<<20)}, TokensPerSec: tps, Sharded: true}}, Torch: torch[1:]},
			{PEs: 4, Ours: []gptTrainRun{{Run: cpuTrainRun{Params: 842496}, TokensPerSec: 5000, Sharded: true}}},
		}}
}

// TestGPTCPUTable: the cells of the table from recorded lines, the arenas
// from the parameter count (842496 × 4 bytes × (2 + 2), and × (2 + 2/PEs)
// when sharded).
func TestGPTCPUTable(t *testing.T) {
	head, rows := gptCPUTable(gptTestReport(t))
	if len(head) != 10 || head[2] != "symddp tokens/s" || head[4] != "symddp/PyTorch" || head[8] != "arenas/PE" || head[9] != "params symddp / PyTorch" {
		t.Errorf("head %q", head)
	}
	want := [][]string{
		{"1", "8", "1400", "911", "1.54×", "100.0 MiB", "90.0 MiB", "356.3 MiB", "12.9 MiB (replicated)", "842496 / 842496"},
		{"2", "16", "8548", "939", "9.11×", "80.0 MiB", "50.0 MiB", "373.7 MiB", "9.6 MiB (sharded)", "842496 / 842496"},
		{"4", "32", "5000", "-", "-", "-", "-", "-", "8.0 MiB (sharded)", "842496 / -"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("rows\n%q\nwant\n%q", rows, want)
	}
	if got := arenaBytes(842496, 4, true); got != 4*842496*2+4*842496*2/4 {
		t.Errorf("arenaBytes(4 PEs, sharded) = %d", got)
	}
}

// TestGPTCPUVerdicts: 1400/910.8 = 1.54 meets the 1.5x target, 9.11x the
// 2x one; without a 2-PE row the target is not measured.
func TestGPTCPUVerdicts(t *testing.T) {
	rep := gptTestReport(t)
	got := gptCPUVerdicts(rep)
	want := []string{
		"target symddp >= 1.5x PyTorch at 1 PE: 1.54x: met",
		"target symddp >= 2x PyTorch at 2 PEs: 9.11x: met",
	}
	if !slices.Equal(got, want) {
		t.Errorf("verdicts %q, want %q", got, want)
	}
	rep.Rows[0].Ours[0].TokensPerSec = 1300
	rep.Rows = rep.Rows[:1]
	want = []string{
		"target symddp >= 1.5x PyTorch at 1 PE: 1.43x: NOT met",
		"target symddp >= 2x PyTorch at 2 PEs: not measured (no such --pes)",
	}
	if got := gptCPUVerdicts(rep); !slices.Equal(got, want) {
		t.Errorf("verdicts %q, want %q", got, want)
	}
	// a busy host gives no verdict
	rep.StartLoad = 0.9
	want = []string{"no verdicts: the host was not quiet (load average 0.90 before the first run, other processes 0.00 CPUs during train's runs and 0.00 during PyTorch's; all must be at most 0.3): run again when nothing else runs"}
	if got := gptCPUVerdicts(rep); !slices.Equal(got, want) {
		t.Errorf("verdicts %q, want %q", got, want)
	}
	rep.StartLoad = 0.1
	rep.Rows[0].Ours[0].Run.OtherCores = 0.5
	if got := gptCPUVerdicts(rep); len(got) != 1 || !strings.HasPrefix(got[0], "no verdicts: the host was not quiet (load average 0.10 before the first run, other processes 0.50 CPUs") {
		t.Errorf("verdicts %q, want none for other processes' 0.5 CPUs", got)
	}
	// other work during PyTorch's runs only (which slows PyTorch's side
	// alone and raises the ratio) withholds the verdicts too
	rep.Rows[0].Ours[0].Run.OtherCores = 0.05
	rep.Rows[0].TorchOther = []float64{0.8}
	if got := gptCPUVerdicts(rep); len(got) != 1 || !strings.Contains(got[0], "other processes 0.05 CPUs during train's runs and 0.80 during PyTorch's") {
		t.Errorf("verdicts %q, want none for other processes' 0.8 CPUs during PyTorch's run", got)
	}
	if line := gptLoadLine(rep); !strings.HasSuffix(line, "kept 0.05 of 2 CPUs busy during them (median), 0.80 during PyTorch's") {
		t.Errorf("load line %q", line)
	}
}

// TestPrintGPTCPUReport: the markdown table and the RESULT lines come out.
func TestPrintGPTCPUReport(t *testing.T) {
	var out bytes.Buffer
	if err := printGPTCPUReport(&out, "markdown", gptTestReport(t)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 2 | 16 | 8548 | 939 | 9.11× | 80.0 MiB | 50.0 MiB | 373.7 MiB | 9.6 MiB (sharded) | 842496 / 842496 |\n",
		"RESULT gpt-cpu model=gpt-tiny pes=2 batch_per_pe=8 symddp_tokens_per_s=8547.7 torch_tokens_per_s=938.7\n",
		"RESULT gpt-cpu model=gpt-tiny pes=4 batch_per_pe=8 symddp_tokens_per_s=5000.0 torch_tokens_per_s=0.0\n",
		"PyTorch 1.13.0a0: DistributedDataParallel over gloo, 1 thread per rank, random tokens (gpt-tiny, 842496 parameters)\n",
		"gpt-cpu: gpt-tiny (842496 parameters), shm, cpu/openblas; 8 sequences of 128 tokens per PE and step;",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

func TestGPTTrainArgs(t *testing.T) {
	o, err := parseGPTCPUFlags([]string{"--pes", "2", "--warmup", "4", "--steps", "8", "--torch-script", "none"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(gptTrainArgs(o, 2, "m.jsonl"), " ")
	for _, want := range []string{"--pes 2 ", "--model gpt-tiny ", "--batch-size 16 ", "--max-steps 12 ", "--log-every 4 ", "--metrics m.jsonl", "--threads 1 ", "--corpus-max 16MiB "} {
		if !strings.Contains(got, want) {
			t.Errorf("train args %q lack %q", got, want)
		}
	}
	for _, bad := range [][]string{{"--steps", "7", "--warmup", "5"}, {"--per-pe-batch", "0"}, {"--pes", "0"}, {"--format", "html"}} {
		if _, err := parseGPTCPUFlags(append(bad, "--torch-script", "none")); err == nil {
			t.Errorf("flags %q were accepted", bad)
		}
	}
}

// TestGPTCPUModel: --model picks what both sides train: train's --model,
// the script's --model, and symddp's parameter count, which the script
// must have (--expect-params); other models are refused.
func TestGPTCPUModel(t *testing.T) {
	for _, c := range []struct {
		flags  []string
		model  string
		params int
	}{
		{nil, "gpt-tiny", 842496},
		{[]string{"--model", "llama-tiny"}, "llama-tiny", 803968},
	} {
		o, err := parseGPTCPUFlags(append(c.flags, "--pes", "2", "--warmup", "4", "--steps", "8", "--torch-script", fakePeer(t), "--python", "true"))
		if err != nil {
			t.Fatal(err)
		}
		if o.model != c.model || o.context != 128 || o.params != c.params {
			t.Errorf("%q: model %s, context %d, %d parameters; want %s, 128, %d", c.flags, o.model, o.context, o.params, c.model, c.params)
		}
		if got := strings.Join(gptTrainArgs(o, 2, "m.jsonl"), " "); !strings.Contains(got, "--model "+c.model+" ") {
			t.Errorf("train args %q lack --model %s", got, c.model)
		}
		want := o.script + " --model " + c.model + " --ranks 2 --batch 8 --warmup 4 --steps 8 --expect-params " + strconv.Itoa(c.params)
		if got := strings.Join(torchArgs(o, 2), " "); got != want {
			t.Errorf("script args %q, want %q", got, want)
		}
	}
	for _, bad := range []string{"mlp", "gpt2", "llama-124m", "nosuch"} {
		if _, err := parseGPTCPUFlags([]string{"--model", bad, "--torch-script", "none"}); err == nil || !strings.Contains(err.Error(), "want gpt-tiny or llama-tiny") {
			t.Errorf("--model %s: %v", bad, err)
		}
	}
}

// TestCheckTorchGPTOutput: the peer's line is taken when it ran the model,
// context, batch and steps asked for with train's parameter count; a
// different count, model or number of lines stops the benchmark.
func TestCheckTorchGPTOutput(t *testing.T) {
	o, err := parseGPTCPUFlags([]string{"--model", "llama-tiny", "--warmup", "1", "--steps", "2", "--torch-script", fakePeer(t), "--python", "true"})
	if err != nil {
		t.Fatal(err)
	}
	l, version, err := checkTorchGPTOutput(o, 2, 803968, torchLlamaOutput)
	if err != nil {
		t.Fatal(err)
	}
	if version != "1.13.0a0" || l.Model != "llama-tiny" || l.Params != 803968 || l.TokensPerSec != 6811.2 || !slices.Equal(l.PeakRSSMiB, []float64{391.1, 392.5}) {
		t.Errorf("line %+v, version %q", l, version)
	}
	for name, c := range map[string]struct {
		ranks, params int
		out, err      string
	}{
		"train's count": {2, 842496, torchLlamaOutput, "peer.py: PyTorch's llama-tiny has 803968 parameters, train's 842496: not the same model"},
		"other model":   {2, 803968, strings.ReplaceAll(torchLlamaOutput, "model=llama-tiny", "model=gpt-tiny"), "peer.py: ran gpt-tiny, context 128, batch 8, 2 steps; asked for llama-tiny, 128, 8, 2"},
		"other ranks":   {1, 803968, torchLlamaOutput, "peer.py --ranks 1: want one torch-gpt line with ranks=1, got 1 lines"},
		"no line":       {2, 803968, "# torch 1.13.0a0, model llama-tiny\n", "peer.py --ranks 2: want one torch-gpt line with ranks=2, got 0 lines"},
	} {
		want := strings.Replace(c.err, "peer.py", o.script, 1)
		if _, _, err := checkTorchGPTOutput(o, c.ranks, c.params, c.out); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
}

// TestTorchPeerLlamaParams runs the PyTorch peer for 2 steps of llama-tiny
// (one rank, one sequence) as symbench runs it, when /usr/bin/python3 has
// PyTorch: its line parses, and its model has the parameter count of
// models.New("llama-tiny"), which symbench also passes as --expect-params.
func TestTorchPeerLlamaParams(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("no PyTorch for /usr/bin/python3 (Debian's python3-torch): %v", err)
	}
	m, err := models.New("llama-tiny", models.Config{})
	if err != nil {
		t.Fatal(err)
	}
	params := 0
	for _, s := range m.Params() {
		params += s.Size()
	}
	o, err := parseGPTCPUFlags([]string{"--model", "llama-tiny", "--per-pe-batch", "1", "--warmup", "1", "--steps", "1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.params != params {
		t.Fatalf("symbench's count %d, models.New's %d", o.params, params)
	}
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	out, other, err := runTorchGPT(context.Background(), o, 1)
	if err != nil {
		t.Fatal(err)
	}
	if other < 0 || math.IsNaN(other) {
		t.Errorf("other processes' CPUs during the run: %g", other)
	}
	l, _, err := checkTorchGPTOutput(o, 1, params, out)
	if err != nil {
		t.Fatal(err)
	}
	if l.Params != 803968 || l.TokensPerSec <= 0 || math.IsNaN(l.Loss) || len(l.PeakRSSMiB) != 1 {
		t.Errorf("line %+v", l)
	}
}

// fakePeer is a file standing for the PyTorch script, which these tests do
// not run (parseGPTCPUFlags checks that it exists).
func fakePeer(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "peer.py")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// What gpt-cpu needs of the PyTorch side is checked before train's runs,
// which take minutes, not after them: the script, the train binary, a
// Python that imports torch.
func TestGPTCPUChecksPeerFirst(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--torch-script", "/nonexistent.py"}, "--torch-script /nonexistent.py: no such file"},
		{[]string{"--train-bin", "/nonexistent/train", "--torch-script", "none"}, "--train-bin /nonexistent/train: no such file"},
		{[]string{"--torch-script", fakePeer(t), "--python", "false"}, "--python false cannot import torch (exit status 1): give a Python with PyTorch"},
	} {
		if _, err := parseGPTCPUFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
