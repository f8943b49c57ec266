package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/petest"
	"github.com/symddp/symddp/internal/syncbuf"
	"github.com/symddp/symddp/traincmd"
)

// TestMain: the launcher re-executes the test binary as the PEs, which run
// main (and so register, as the program does); the tests themselves
// register once here.
func TestMain(m *testing.M) {
	if os.Getenv(comm.EnvPE) != "" {
		main()
		os.Exit(0)
	}
	register()
	os.Exit(m.Run())
}

var (
	stepLine    = regexp.MustCompile(`(?m)^(?:\[pe 0\] )?step \d+/40 loss ([0-9.]+) `)
	replicaLine = regexp.MustCompile(`replicas identical on both PEs \(step 40, parameter hash ([0-9a-f]{16})\)`)
)

// trainOwnLM runs ownlm through the train command at 2 PEs for 40 steps
// of a small shape (2 layers, width 64, context 64) on 1 MiB of text,
// with extra flags, and returns stdout and stderr.
func trainOwnLM(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	args := append([]string{"--pes", "2", "--model", "ownlm", "--layers", "2", "--width", "64", "--context", "64",
		"--max-steps", "40", "--corpus-max", "1MiB", "--log-every", "10", "--eval-every", "40", "--eval-batches", "2",
		"--no-progress"}, extra...)
	var out, errs syncbuf.Buffer
	if code := traincmd.Run(args, &out, &errs); code != 0 {
		t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errs.String())
	}
	return out.String(), errs.String()
}

// TestOwnLMThroughTrain: the decoder of public layers trains through the
// train command: its parameters are counted, it states its FLOPs (MFU),
// the loss falls, the replicas end identical, the command samples from it,
// and --recompute block (the Decoder's checkpoints) ends on the same bits.
func TestOwnLMThroughTrain(t *testing.T) {
	text, log := trainOwnLM(t, "--sample-tokens", "20", "--peak-tflops", "1")
	all := log + text
	// embed 256x64, pos 64x64; per layer ln_1 2x64, qkv 192x64+192, o_proj
	// 64x64+64, ln_2 2x64, c_fc 128x64+128, c_proj 64x128+64; ln_f 2x64;
	// head 256x64
	if !strings.Contains(all, "training ownlm: 103936 parameters, 2 PEs") {
		t.Errorf("no start line with 103936 parameters in:\n%s", all)
	}
	// 6N + 6·L·C·T = 6·103936 + 6·2·64·64
	if !strings.Contains(all, "6.728e+05 FLOPs per token (6N + 6LCT)") {
		t.Errorf("no MFU line with 672768 FLOPs per token in:\n%s", all)
	}
	losses := petest.Losses(t, stepLine, text)
	first, last := losses[0], losses[len(losses)-1]
	t.Logf("training loss %.3f -> %.3f over %d log lines", first, last, len(losses))
	if !(last < first-0.3) {
		t.Errorf("training losses %v: want the last at least 0.3 below the first", losses)
	}
	m := replicaLine.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no replica check at step 40 in:\n%s", text)
	}
	if !strings.Contains(text, "sample (temperature 0.8, top-k 40) after ") {
		t.Errorf("no sample in:\n%s", text)
	}
	text, _ = trainOwnLM(t, "--sample-tokens", "0", "--recompute", "block")
	r := replicaLine.FindStringSubmatch(text)
	if r == nil || r[1] != m[1] {
		t.Errorf("--recompute block: replica check %q, want parameter hash %s as without\n%s", r, m[1], text)
	}
}

// TestOwnLMErrors: settings ownlm does not take are one line and exit 2,
// before any PE starts.
func TestOwnLMErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--recompute", "gelu"}, "model ownlm: recompute gelu: the blocks of ownlm share no MLP hidden activation (it takes none and block)"},
		{[]string{"--kv-heads", "2"}, "model ownlm: key/value heads 2: ownlm's attention has as many key/value heads as queries"},
		{[]string{"--rope-theta", "10000"}, "model ownlm: rope theta 10000: ownlm has learned positions, no rotary embedding"},
		{[]string{"--heads", "3"}, "model ownlm: 3 heads of width 128: the heads must divide the width"},
	} {
		var out, errs syncbuf.Buffer
		code := traincmd.Run(append([]string{"--model", "ownlm", "--max-steps", "1"}, tc.args...), &out, &errs)
		first, _, _ := strings.Cut(errs.String(), "\n")
		if code != 2 || !strings.Contains(first, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and a first line containing %q", tc.args, code, errs.String(), tc.want)
		}
	}
}
