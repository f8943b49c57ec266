package cuda

import (
	"fmt"
	"os"

	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/settings"
)

// The bf16 plans' GEMMs: cuBLASLt plans (sdc_bf16_gemm_create) made once per
// shape and epilogue for the whole engine, so that the layers of a model
// share them (twelve transformer blocks run one QKV plan), each tuned at
// its first run.

// ShareGPU tells e, before its plans are made, that other PEs' kernels run
// on its GPU while gradient buckets are reduced during backward (ddp calls
// it for PEs that share a GPU and reduce in buckets): its bf16 GEMMs then
// take cuBLASLt algorithms of one-block thread-block clusters, for the whole
// process (sdc_one_block_clusters). Under MPS a GEMM's cluster of several
// blocks must be placed at once, and the other PEs' barrier warps parked
// for the reduction kept it from being placed: the step hung; with
// one-block clusters it ran (docs/GPU.md). SYMDDP_CUDA_LT_NOCLUSTER=0 keeps
// cuBLASLt's choice. It returns what it did, for the log ("" for nothing).
func (e *Engine) ShareGPU() (string, error) {
	if settings.Get(settings.CUDANoCluster) == "0" {
		return "", nil
	}
	if err := e.dev.OneBlockClusters(); err != nil {
		return "", fmt.Errorf("cuda engine: %w", err)
	}
	return "bf16 GEMMs of one-block clusters", nil
}

// gemmPlan returns the engine's plan of the row-major GEMM C (m,n) =
// op(A) (m,k) op(B) (k,n) with fp32 accumulation, C and the bias of ctype,
// the epilogue epi, and C added to (acc): made at the first ask (build
// time), the same plan after.
func (e *Engine) gemmPlan(m, n, k int, ta, tb bool, ctype cudalib.DType, epi cudalib.BF16Epilogue, acc bool) (uintptr, error) {
	bf, err := e.bf16()
	if err != nil {
		return 0, err
	}
	d := cudalib.GemmDesc{M: m, N: n, K: k, TransA: ta, TransB: tb, Batch: 1, CType: ctype, BiasType: ctype,
		Epilogue: epi, Accumulate: acc, WorkspaceBytes: bf16Workspace}
	if p, ok := bf.gemms[d]; ok {
		return p, nil
	}
	p64, err := e.dev.BF16GemmCreate(d)
	p := uintptr(p64)
	if err != nil {
		return 0, fmt.Errorf("a %dx%dx%d bf16 GEMM (epilogue %d): %w", m, n, k, epi, err)
	}
	bf.gemms[d], bf.descs[p] = p, d
	bf.order = append(bf.order, p)
	return p, nil
}

// gemm runs plan: c = op(a) op(b) (+ bias, the epilogue with aux). Its
// first run outside a capture (the eager warm-up step before the step's
// graph is recorded) first times cuBLASLt's candidates for it on these
// operands and keeps the fastest (sdc_bf16_gemm_tune), unless
// SYMDDP_CUDA_TUNE=0; an accumulating plan (a residual add) is timed into
// scratch, so that the step's result is what one run gives. Measured on the
// H200 at GPT-2 124M's shapes (B=16), the heuristic's choices against the
// tuned ones: the MLP's input gradient with GELU's derivative 197.5 ->
// 152.0 us, the attention projection's dW 65.4 -> 56.8 us, the rest of a
// block's GEMMs 1-6% (2026-12-02, scripts/gpu-gpt-kernels-check.sh, on the
// fused GPT, which ran the same plans). Every PE tunes on its own: that
// changes the rounding of its local gradients, not the replicas (see
// sdc_lt_tune in cuda/sd_compute_lt.cu).
func (e *Engine) gemm(plan, c, a, b, bias, aux uintptr) error {
	if err := e.tuneFirst(plan, c, a, b, bias, aux); err != nil {
		return err
	}
	bf := e.bf
	return e.dev.BF16GemmRun(uint64(plan), c, a, b, bias, aux, bf.ws)
}

// gemmInto runs an accumulating plan (a residual add) with C read from c and
// the result written to d, tuned at its first use as gemm does.
func (e *Engine) gemmInto(plan, d, c, a, b, bias uintptr) error {
	if err := e.tuneFirst(plan, d, a, b, bias, 0); err != nil {
		return err
	}
	bf := e.bf
	return e.dev.BF16GemmRunInto(uint64(plan), d, c, a, b, bias, 0, bf.ws)
}

// tuneFirst tunes plan at its first run outside a capture (see gemm).
func (e *Engine) tuneFirst(plan, c, a, b, bias, aux uintptr) error {
	bf := e.bf
	if !bf.tune || bf.tuned[plan] || e.capture.active {
		return nil
	}
	return e.tunePlan(plan, c, a, b, bias, aux)
}

// bf16TuneCandidates and bf16TuneReps: how many of cuBLASLt's candidates a
// plan's tuning times (split-K variants come on top for a dW's underfilling
// choice), and how many runs each.
const bf16TuneCandidates, bf16TuneReps = 8, 5

func (e *Engine) tunePlan(plan, c, a, b, bias, aux uintptr) error {
	bf := e.bf
	d := bf.descs[plan]
	if d.Accumulate {
		bytes := 2 * d.M * d.N
		if d.CType == cudalib.Float32 {
			bytes *= 2
		}
		if bytes > bf.tuneCBytes {
			bf.tuneC, bf.tuneCBytes = e.alloc("bf16 GEMM tuning", bytes), bytes
		}
		c = bf.tuneC
	}
	if err := e.dev.BF16GemmTune(uint64(plan), c, a, b, bias, aux, bf.ws, bf16TuneCandidates, bf16TuneReps); err != nil {
		return fmt.Errorf("tuning the %dx%dx%d GEMM: %w", d.M, d.N, d.K, err)
	}
	bf.tuned[plan] = true
	if bf.tuneLog {
		acc := ""
		if d.Accumulate {
			acc = ", accumulating"
		}
		first, _ := e.dev.BF16GemmTuned(uint64(plan), false)
		kept, _ := e.dev.BF16GemmTuned(uint64(plan), true)
		fmt.Fprintf(os.Stderr, "cuda: bf16 GEMM %dx%dx%d (epilogue %d%s): heuristic's choice %.1f us, kept %.1f us\n",
			d.M, d.N, d.K, d.Epilogue, acc, float64(first)/1e3, float64(kept)/1e3)
	}
	return nil
}
