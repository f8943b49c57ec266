#!/usr/bin/env python3
"""PyTorch baseline for symddp's GPT-2 training step (issue 20): a
nanoGPT-shaped GPT-2 written here (pre-LayerNorm blocks, GELU tanh, learned
positions, tied input/output embedding, F.scaled_dot_product_attention with
is_causal=True, fused AdamW), synthetic tokens resident on the GPU, timed
with CUDA events after a warm-up.

    /opt/torch/.venv/bin/python3 bench/torch_gpt_bench.py [--preset all|gpt2|tiny|small]
        [--modes eager,compile,fp32] [--batch 16,32] [--layers L --heads H --width C
        --context T --vocab V] [--steps N] [--warmup N] [--quick]

Modes: eager (bf16 autocast), compile (bf16 autocast, torch.compile of the
model and its loss), fp32 (eager, fp32 with TF32 off); eager-ckpt and
compile-ckpt are eager and compile with activation checkpointing of every
block (torch.utils.checkpoint, non-reentrant: each block's activations are
recomputed in backward, as symddp's --recompute block does). Presets
(default all):
  gpt2   12 layers, 12 heads, 768 wide, T=1024, vocab 50304, batch 16 and 32
         (fp32 at batch 8)
  tiny   4 layers, 4 heads, 128 wide, T=128, vocab 256, batch 64
  small  6 layers, 6 heads, 384 wide, T=256, vocab 256, batch 64
  medium GPT-2 medium (350M): 24 layers, 16 heads, 1024 wide, T=1024, vocab 50304,
         batch 16 (not in all)
  large  GPT-2 large (774M): 36 layers, 20 heads, 1280 wide, batch 16 (not in all)
  xl     GPT-2 XL: 48 layers, 25 heads, 1600 wide, T=1024, vocab 50304, batch 16
         (not in all)
--layers/--heads/--width/--context/--vocab describe one custom model instead.

MFU: FLOPs per token = 6 N + 6 L C T, N = every parameter counted once
(embeddings included, the tied head once; nanoGPT's 6N + 12LCT less the
half of the attention FLOPs that the causal mask skips), against a peak of
989e12 FLOP/s for bf16 and 67e12 for fp32 (H200). One line per run:

  RESULT torch_gpt preset=gpt2 layers=12 heads=12 width=768 context=1024 vocab=50304 batch=16
      mode=compile ms_per_step=32.80 tokens_per_s=499671 mfu=0.406 n_params=124475904
      flops_per_token=8.035e+08 peak_mem_gib=... loss=...
"""
import argparse
import math
import sys
import time

PEAK = {"eager": 989e12, "compile": 989e12, "fp32": 67e12, "eager-ckpt": 989e12, "compile-ckpt": 989e12}
PRESETS = {
    "gpt2": dict(layers=12, heads=12, width=768, context=1024, vocab=50304, batches={"eager": [16, 32], "compile": [16, 32], "fp32": [8]}),
    "tiny": dict(layers=4, heads=4, width=128, context=128, vocab=256, batches={"eager": [64], "compile": [64], "fp32": [64]}),
    "small": dict(layers=6, heads=6, width=384, context=256, vocab=256, batches={"eager": [64], "compile": [64], "fp32": [64]}),
    "medium": dict(layers=24, heads=16, width=1024, context=1024, vocab=50304, batches={"eager": [16], "compile": [16], "fp32": [4]}),
    "large": dict(layers=36, heads=20, width=1280, context=1024, vocab=50304, batches={"eager": [16], "compile": [16], "fp32": [4]}),
    "xl": dict(layers=48, heads=25, width=1600, context=1024, vocab=50304, batches={"eager": [16], "compile": [16], "fp32": [4]}),
}
ALL = ["gpt2", "tiny", "small"]


def build_model(torch, L, H, C, T, V, ckpt=False):
    nn = torch.nn
    F = torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)

        def forward(self, x):
            B, T_, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T_, H, C // H).transpose(1, 2)
            k = k.view(B, T_, H, C // H).transpose(1, 2)
            v = v.view(B, T_, H, C // H).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T_, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C)
            self.c_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(C)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
                    nn.init.normal_(p, mean=0.0, std=std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            T_ = idx.shape[1]
            pos = torch.arange(T_, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                if ckpt:  # keep the block's input only; recompute the rest in backward
                    x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
                else:
                    x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))  # fp32 under autocast

    return GPT().cuda()


def run_one(torch, preset, L, H, C, T, V, B, mode, steps, warmup, profile=0):
    fp32 = mode == "fp32"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    model = build_model(torch, L, H, C, T, V, ckpt=mode.endswith("-ckpt"))
    n_params = sum(p.numel() for p in model.parameters())  # tied weight once
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if mode.startswith("compile") else model
    g = torch.Generator(device="cuda")
    g.manual_seed(2)
    data = torch.randint(0, V, (B, T + 1), device="cuda", generator=g)
    x, y = data[:, :T].contiguous(), data[:, 1:].contiguous()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=not fp32):
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for _ in range(warmup):
        loss = step()
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        loss = step()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / steps
    tokens_per_s = B * T / (ms / 1e3)
    flops_per_token = 6 * n_params + 6 * L * C * T
    mfu = flops_per_token * tokens_per_s / PEAK[mode]
    peak_gib = torch.cuda.max_memory_allocated() / 2**30
    print(f"RESULT torch_gpt preset={preset} layers={L} heads={H} width={C} context={T} vocab={V} batch={B} "
          f"mode={mode} ms_per_step={ms:.2f} tokens_per_s={tokens_per_s:.0f} mfu={mfu:.3f} n_params={n_params} "
          f"flops_per_token={flops_per_token:.4g} peak_mem_gib={peak_gib:.2f} loss={loss.item():.4f} "
          f"warmup_s={warm_s:.1f} steps={steps}", flush=True)
    if profile:
        # the step's kernels: CUDA time per step of each, the largest first
        from torch.profiler import ProfilerActivity, profile as tprofile
        n = 5
        with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step()
            torch.cuda.synchronize()
        rows = [(e.key, getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) / n, e.count / n)
                for e in prof.key_averages()]
        rows = [r for r in rows if r[1] > 0]
        total = sum(r[1] for r in rows)
        print(f"PROFILE preset={preset} batch={B} mode={mode}: kernels {total / 1e3:.2f} ms per step "
              f"(timed {ms:.2f} ms)", flush=True)
        for key, us, cnt in sorted(rows, key=lambda r: -r[1])[:profile]:
            print(f"PROFILE {us:10.1f} us/step {cnt:6.1f}/step  {key[:120]}", flush=True)
    del model, fwd, opt, data, x, y
    if mode.startswith("compile"):
        torch._dynamo.reset()
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="all", help="all (gpt2, tiny, small), or a comma list of gpt2, tiny, small, medium, large, xl")
    ap.add_argument("--modes", default="eager,compile,fp32")
    ap.add_argument("--batch", default="", help="batch sizes (comma list), instead of the preset's")
    for k in ("layers", "heads", "width", "context", "vocab"):
        ap.add_argument("--" + k, type=int, default=0)
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default 20, --quick 6)")
    ap.add_argument("--warmup", type=int, default=0, help="warm-up steps (default 5, --quick 3)")
    ap.add_argument("--quick", action="store_true", help="few steps")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after timing, profile 5 steps (torch.profiler) and print the N kernels with the most CUDA time")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("torch_gpt_bench.py: no CUDA device")
    steps = a.steps or (6 if a.quick else 20)
    warmup = a.warmup or (3 if a.quick else 5)
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in PEAK:
            sys.exit(f"torch_gpt_bench.py: unknown mode {m!r} ({', '.join(PEAK)})")
    batches = [int(b) for b in a.batch.split(",") if b]
    custom = [a.layers, a.heads, a.width, a.context, a.vocab]
    if any(custom):
        if not all(custom):
            sys.exit("torch_gpt_bench.py: a custom model needs --layers --heads --width --context --vocab")
        if a.width % a.heads:
            sys.exit("torch_gpt_bench.py: --width must be a multiple of --heads")
        runs = [("custom", dict(layers=a.layers, heads=a.heads, width=a.width, context=a.context, vocab=a.vocab,
                                batches={m: batches or [8] for m in PEAK}))]
    else:
        names = ALL if a.preset == "all" else [p for p in a.preset.split(",") if p]
        for n in names:
            if n not in PRESETS:
                sys.exit(f"torch_gpt_bench.py: unknown preset {n!r} ({', '.join(PRESETS)})")
        runs = [(n, PRESETS[n]) for n in names]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, steps {steps}, warm-up {warmup}", flush=True)
    failed = 0
    for name, p in runs:
        for mode in modes:
            for B in (batches or p["batches"][mode.removesuffix("-ckpt")]):
                try:
                    run_one(torch, name, p["layers"], p["heads"], p["width"], p["context"], p["vocab"], B, mode,
                            steps, warmup, a.profile)
                except Exception as e:  # one failed configuration must not hide the others
                    failed += 1
                    print(f"ERROR torch_gpt preset={name} batch={B} mode={mode}: {type(e).__name__}: {e}", flush=True)
                    torch.cuda.empty_cache()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
