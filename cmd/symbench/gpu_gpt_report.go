package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// gpuGPTTarget is the speed target of the GPT in bf16: symddp's tokens/s at
// least 1.1 times torch.compile's on the same shapes.
const gpuGPTTarget = 1.1

// gptGPURow is one configuration's measurements.
type gptGPURow struct {
	cfg    gptGPUConfig
	ours   gptRun
	torch  map[string]torchGPUGPT // by mode: eager, compile
	gpu    string                 // train's engine notice
	fusion string                 // train's model notice
	err    error                  // the train run failed
}

// gptRun is what one train run measured.
type gptRun struct {
	tokensPerSec float64 // over the timed steps
	mfu          float64 // 0: train knew no peak
	precision    string  // what the model computed in
	deviceBytes  int64   // PE 0's device memory (engine pool + arenas); 0: not reported
}

// readGPTMetrics reads train's metrics log: tokens/s between the logs at
// steps from and to (sequences/s times the context), and, from the final
// record, the precision and the MFU at that rate (its FLOPs per token over
// the peak train used).
func readGPTMetrics(metrics []byte, from, to, context int) (gptRun, error) {
	sps, _, err := timedWindow(bytes.NewReader(metrics), from, to)
	if err != nil {
		return gptRun{}, err
	}
	r := gptRun{tokensPerSec: sps * float64(context)}
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	for sc.Scan() {
		var m struct {
			Final         bool     `json:"final"`
			FLOPsPerToken *float64 `json:"flops_per_token"`
			PeakFLOPs     *float64 `json:"peak_flops"`
			Precision     string   `json:"precision"`
			DeviceBytes   int64    `json:"device_bytes"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || !m.Final {
			continue // timedWindow checked the lines
		}
		if m.FLOPsPerToken == nil {
			return r, fmt.Errorf("the metrics log's final record has no flops_per_token: is train older than symbench?")
		}
		r.precision, r.deviceBytes = m.Precision, m.DeviceBytes
		if m.PeakFLOPs != nil && *m.PeakFLOPs > 0 {
			r.mfu = r.tokensPerSec * *m.FLOPsPerToken / *m.PeakFLOPs
		}
		return r, nil
	}
	return r, fmt.Errorf("no final record in the metrics log")
}

// torchGPUGPT is one RESULT line of bench/torch_gpt_bench.py or
// bench/torch_llama_bench.py.
type torchGPUGPT struct {
	preset       string
	batch        int
	mode         string // eager, compile, fp32
	tokensPerSec float64
	mfu          float64
	peakMemGiB   float64 // max_memory_allocated (0: not in the line)
}

// parseTorchGPUGPT reads a script's stdout: its "RESULT torch_gpt ..." (or
// "RESULT torch_llama ...") lines, and its "ERROR torch_gpt ..." (or
// torch_llama) lines (a configuration that failed),
// returned as they are. A RESULT line without the fields used here is
// returned as an error line too.
func parseTorchGPUGPT(out string) (results []torchGPUGPT, errLines []string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "ERROR torch_gpt ") || strings.HasPrefix(text, "ERROR torch_llama ") {
			errLines = append(errLines, text)
			continue
		}
		rest, ok := strings.CutPrefix(text, "RESULT torch_gpt ")
		if !ok {
			rest, ok = strings.CutPrefix(text, "RESULT torch_llama ")
		}
		if !ok {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(rest) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		var r torchGPUGPT
		var err1, err2, err3 error
		r.preset, r.mode = kv["preset"], kv["mode"]
		r.batch, err1 = strconv.Atoi(kv["batch"])
		r.tokensPerSec, err2 = strconv.ParseFloat(kv["tokens_per_s"], 64)
		r.mfu, err3 = strconv.ParseFloat(kv["mfu"], 64)
		r.peakMemGiB, _ = strconv.ParseFloat(kv["peak_mem_gib"], 64)
		if r.preset == "" || r.mode == "" || err1 != nil || err2 != nil || err3 != nil {
			errLines = append(errLines, "unreadable line: "+text)
			continue
		}
		results = append(results, r)
	}
	return results, errLines
}

// printGPUGPTTable prints the GPU and the table of every configuration,
// then one RESULT line per configuration that trained, for scripts.
func printGPUGPTTable(w io.Writer, rows []gptGPURow) error {
	for _, r := range rows {
		if r.gpu != "" {
			fmt.Fprintf(w, "GPU: %s\n", r.gpu)
			break
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tbatch\tsymddp tokens/s\tMFU\ttorch eager tokens/s\ttorch.compile tokens/s\tsymddp/compile\ttarget\tsymddp GiB\tcompile GiB\t")
	for _, r := range rows {
		ours, mfu := "-", "-"
		if r.err != nil {
			ours = "failed"
		} else if r.ours.tokensPerSec > 0 {
			ours = fmt.Sprintf("%.0f", r.ours.tokensPerSec)
			if r.ours.mfu > 0 {
				mfu = fmt.Sprintf("%.1f%% %s", 100*r.ours.mfu, r.ours.precision)
			}
		}
		// the compiled peer: torch.compile, or with every block
		// checkpointed (compile-ckpt) when only that ran (--recompute
		// block's peer), marked so
		peer, mark := "compile", ""
		if _, ok := r.torch[peer]; !ok {
			if _, ok := r.torch["compile-ckpt"]; ok {
				peer, mark = "compile-ckpt", " (ckpt)"
			}
		}
		ratio, target := "-", fmt.Sprintf(">= %.1fx", gpuGPTTarget)
		if c := r.torch[peer].tokensPerSec; c > 0 && r.err == nil && r.ours.tokensPerSec > 0 {
			q := r.ours.tokensPerSec / c
			ratio = fmt.Sprintf("%.2fx", q)
			if q >= gpuGPTTarget {
				target += " met"
			} else {
				target += " not met"
			}
		}
		mem, tmem := "-", "-"
		if r.err == nil && r.ours.deviceBytes > 0 {
			mem = fmt.Sprintf("%.2f", float64(r.ours.deviceBytes)/(1<<30))
		}
		if t, ok := r.torch[peer]; ok && t.peakMemGiB > 0 {
			tmem = fmt.Sprintf("%.2f%s", t.peakMemGiB, mark)
		}
		cc := torchCell(r.torch, peer)
		if cc != "-" {
			cc += mark
		}
		batch := strconv.Itoa(r.cfg.batch)
		if t, ok := r.torch[peer]; ok && r.cfg.fit && t.batch != r.cfg.batch {
			batch += "/" + strconv.Itoa(t.batch) // each side's largest that fits
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.cfg.model().label, batch, ours, mfu,
			torchCell(r.torch, "eager"), cc, ratio, target, mem, tmem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		if r.err != nil {
			continue
		}
		fmt.Fprintf(w, "RESULT gpu-gpt model=%s batch=%d symddp=%.0f mfu=%.3f precision=%s eager=%.0f compile=%.0f", r.cfg.preset, r.cfg.batch,
			r.ours.tokensPerSec, r.ours.mfu, r.ours.precision, r.torch["eager"].tokensPerSec, r.torch["compile"].tokensPerSec)
		if t, ok := r.torch["compile-ckpt"]; ok {
			fmt.Fprintf(w, " compile_ckpt=%.0f", t.tokensPerSec)
		}
		if t, ok := r.torch["compile"]; ok && r.cfg.fit {
			fmt.Fprintf(w, " fit=1 compile_batch=%d", t.batch)
		}
		fmt.Fprintln(w)
	}
	for _, r := range rows {
		if r.err == nil && r.fusion != "" {
			fmt.Fprintf(w, "FUSION model=%s batch=%d: %s\n", r.cfg.preset, r.cfg.batch, r.fusion)
		}
	}
	return nil
}

func torchCell(m map[string]torchGPUGPT, mode string) string {
	if t, ok := m[mode]; ok && t.tokensPerSec > 0 {
		return fmt.Sprintf("%.0f", t.tokensPerSec)
	}
	return "-"
}
