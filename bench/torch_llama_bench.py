#!/usr/bin/env python3
"""PyTorch baseline for symddp's Llama training step (models/llama.go,
docs/LLAMA.md), timed as torch_gpt_bench.py times GPT-2.

The model is written here: pre-norm blocks x + attn(rmsnorm(x)) and
x + swiglu(rmsnorm(x)); RMSNorm with eps 1e-5 and its statistics in fp32;
rotary embedding in rotate_half's pairing (channel i with i + hs/2) with base
theta, its cos and sin computed in float64 and rounded to fp32 once;
grouped-query attention (query heads g*j .. g*j+g-1 read key/value head j);
SwiGLU down(silu(gate(x)) * up(x)); no biases, no learnt positions; the head
tied to the embedding where the preset ties it. Parameters are named as
Hugging Face's LlamaForCausalLM (and symddp) name them, in symddp's arena
order, and initialised as symddp's are: N(0, 0.02) for the embedding and the
projections, N(0, 0.02/sqrt(2 layers)) for o_proj and down_proj, norm gains
1. Fused AdamW (lr 6e-4, betas 0.9 and 0.95, eps 1e-8, weight decay 0.1 on
the matrices and none on the gains, no clipping, no warm-up: what symbench
gives train), synthetic tokens resident on the device, timed with CUDA
events after a warm-up (time.perf_counter on the CPU). It has not run on a
GPU yet.

On the GPU host (PyTorch 2.5 or later has SDPA's enable_gqa; 2.0 on runs
with the fallback), one command each, so that none runs for long:

    /opt/torch/.venv/bin/python3 bench/torch_llama_bench.py --preset llama-124m
    /opt/torch/.venv/bin/python3 bench/torch_llama_bench.py --preset llama3-1b --modes eager,fp32
    /opt/torch/.venv/bin/python3 bench/torch_llama_bench.py --preset llama3-1b --modes compile --batch 16,12,8
    /opt/torch/.venv/bin/python3 bench/torch_llama_bench.py --preset llama3-1b --modes eager-ckpt,compile-ckpt

(compile compiles again for every batch it tries: give it few), and on a CPU
(PyTorch 1.13 on; compile needs 2.0):

    python3 bench/torch_llama_bench.py --device cpu [--preset tiny --modes eager,fp32]

Modes: eager (bf16 autocast), compile (bf16 autocast, torch.compile of the
model and its loss), fp32 (eager, fp32 with TF32 off); eager-ckpt and
compile-ckpt checkpoint every layer (torch.utils.checkpoint, non-reentrant:
each layer's activations are recomputed in backward, as symddp's
--recompute block does).

Presets (symddp's of the same names; default all, which is tiny and
llama-124m; on --device cpu tiny):
  tiny        llama-tiny: 4 layers, width 128, 4 query / 2 key-value heads,
              SwiGLU 352, T=128, vocab 256, theta 10000, untied; batch 64
              (8 on the CPU)
  llama-124m  12 layers, width 768, 12 / 4 heads, SwiGLU 2048, T=1024,
              vocab 50304, theta 10000, tied; batch 16
  llama3-1b   Llama 3.2 1B's shape: 16 layers, width 2048, 32 / 8 heads,
              SwiGLU 8192, T=2048, vocab 128256, theta 500000, tied; batches
              32, 24, 16, 12, 8, 4, 2, 1 tried largest first until one fits
              (not in all)
Size flags describe one custom model instead: the named preset (exactly
one; tiny, i.e. symddp's "llama", when --preset is all) with those sizes
changed, SwiGLU's width following Meta's rule from the width unless --ffn
gives it (floor(8C/3), times 1.5 for llama3-1b, rounded up to a multiple of
32 for tiny, 256 otherwise), as `train --model llama --width 256` sizes its
model. --batch replaces the preset's batches; with --fit (llama3-1b's
default) they are tried largest first and only the largest that fits is
timed, each one that runs out of memory printed as an ERROR line.

Attention: --attention auto takes F.scaled_dot_product_attention(q, k, v,
is_causal=True, enable_gqa=True) where torch has enable_gqa (2.5 on), else
SDPA on key/value heads repeated for their query heads (repeat_interleave,
2.0 on), else the same written out (causal mask, softmax, two matmuls: 1.13).
gqa, repeat and math force one of them (repeat beside gqa shows what the
copy of K and V costs, and which SDPA kernels take grouped heads).

MFU: FLOPs per token = 6 N + 6 L C T, N = every parameter counted once (the
embedding included, a tied head not again), L layers, C the width (the
query heads' width), T the context: models.Llama.FLOPsPerToken's formula
(attention's Q K^T and P V under the causal mask; key/value heads shared by
groups do not change those products). Against 989e12 FLOP/s for bf16 and
67e12 for fp32 (H200), or --peak-tflops; on the CPU without --peak-tflops
mfu is nan. peak_mem_gib is torch.cuda.max_memory_allocated, on the CPU the
process's peak resident size. One line per run:

  RESULT torch_llama model=llama preset=llama-124m layers=12 heads=12
      kv_heads=4 width=768 ffn=2048 context=1024 vocab=50304 rope_theta=10000
      tied=1 batch=16 mode=compile attention=sdpa-gqa adamw=fused device=cuda
      ms_per_step=... tokens_per_s=... mfu=... n_params=114150144
      flops_per_token=7.415e+08 peak_mem_gib=... loss=... warmup_s=... steps=20

(on one line) and for a configuration that failed

  ERROR torch_llama model=llama preset=llama3-1b batch=32 mode=eager: OutOfMemoryError: ...

Exit 1 when a configuration failed (a batch search fails only when no batch
fits).

Checks that this is symddp's model (no device needed; bench/
torch_llama_bench_test.go runs both):
  --param-count builds each model on the meta device and prints
      PARAMS torch_llama model=llama preset=... n_params=N flops_per_token=F
  and then one "PARAM name d0,d1" line per parameter in order; symddp's
  models.Llama has the same names, shapes, order, count and FLOPs.
  --check-arena FILE --tokens 1,2,3 --logits FILE [--rtol 1e-4] loads a
  symddp parameter arena (float32 little-endian, the parameters in order)
  into the model of the preset and size flags, runs its forward in float64
  on the CPU over the tokens, and compares the logits with FILE's (float32,
  one row of vocab per token, symddp's). It prints one JSON line
  (max_abs_diff, max_abs_logit, rel, rtol, argmax_last, ok); exit 0 when rel
  is within rtol, 1 when not, 2 for bad input.
"""
import argparse
import gc
import json
import math
import resource
import sys
import time

PROG = "torch_llama_bench.py"
MODES = ("eager", "compile", "fp32", "eager-ckpt", "compile-ckpt")
PEAK_BF16, PEAK_FP32 = 989e12, 67e12
EPS = 1e-5
# symddp's presets (models.LlamaTiny, Llama124M, Llama3_1B); multiple and
# multiplier are Meta's SwiGLU sizing rule (LlamaConfig.FFN).
PRESETS = {
    "tiny": dict(layers=4, width=128, heads=4, kv_heads=2, ffn=0, multiple=32, multiplier=0.0, context=128,
                 vocab=256, rope_theta=10000, tied=False, batches={"cuda": [64], "cpu": [8]}, fit=False),
    "llama-124m": dict(layers=12, width=768, heads=12, kv_heads=4, ffn=0, multiple=256, multiplier=0.0, context=1024,
                       vocab=50304, rope_theta=10000, tied=True, batches={"cuda": [16], "cpu": [1]}, fit=False),
    "llama3-1b": dict(layers=16, width=2048, heads=32, kv_heads=8, ffn=0, multiple=256, multiplier=1.5, context=2048,
                      vocab=128256, rope_theta=500000, tied=True,
                      batches={"cuda": [32, 24, 16, 12, 8, 4, 2, 1], "cpu": [1]}, fit=True),
}
ALIASES = {"llama-tiny": "tiny", "llama": "tiny"}
ALL = ["tiny", "llama-124m"]
SIZE_FLAGS = ("layers", "heads", "kv_heads", "width", "ffn", "context", "vocab", "rope_theta")


def ffn_hidden(p):
    """SwiGLU's hidden width: p["ffn"], else floor(8C/3) times the
    multiplier (truncated), rounded up to the multiple."""
    if p["ffn"] > 0:
        return p["ffn"]
    h = 8 * p["width"] // 3
    if p["multiplier"] > 0:
        h = int(p["multiplier"] * h)
    m = p["multiple"] or 256
    return (h + m - 1) // m * m


def check_sizes(p):
    """One line saying what does not fit together, as LlamaConfig.Validate, or None."""
    if min(p["layers"], p["heads"], p["kv_heads"], p["width"], p["context"]) < 1 or p["vocab"] < 2:
        return "need at least 1 layer, head, key/value head, width and position and 2 tokens"
    if p["width"] % p["heads"]:
        return f"{p['heads']} heads do not divide the width {p['width']}"
    if p["heads"] % p["kv_heads"]:
        return f"{p['kv_heads']} key/value heads do not divide the {p['heads']} query heads"
    if (p["width"] // p["heads"]) % 2:
        return f"head size {p['width'] // p['heads']} is odd: the rotary embedding turns pairs of channels"
    if not p["rope_theta"] > 1 or p["rope_theta"] != int(p["rope_theta"]):
        return f"rope theta {p['rope_theta']}: want a whole number above 1"
    return None


def flops_per_token(p, n_params):
    """models.Llama.FLOPsPerToken: 6 N + 6 L C T."""
    return 6 * n_params + 6 * p["layers"] * p["width"] * p["context"]


def pick_attention(torch, want):
    """The attention path: sdpa-gqa, sdpa-repeat or math (see the docstring)."""
    F = torch.nn.functional
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    has_gqa = False
    if has_sdpa:
        try:  # enable_gqa is PyTorch 2.5's
            q, kv = torch.zeros(1, 2, 1, 2), torch.zeros(1, 1, 1, 2)
            F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
            has_gqa = True
        except (TypeError, RuntimeError):
            pass
    if want == "auto":
        return "sdpa-gqa" if has_gqa else "sdpa-repeat" if has_sdpa else "math"
    if want == "gqa" and not has_gqa:
        sys.exit(f"{PROG}: --attention gqa: torch {torch.__version__} has no enable_gqa in scaled_dot_product_attention (2.5 on)")
    if want == "repeat" and not has_sdpa:
        sys.exit(f"{PROG}: --attention repeat: torch {torch.__version__} has no scaled_dot_product_attention (2.0 on)")
    return {"gqa": "sdpa-gqa", "repeat": "sdpa-repeat", "math": "math"}[want]


def build_model(torch, p, device, attention, ckpt=False):
    """The Llama of sizes p on device, initialised as symddp initialises it."""
    nn = torch.nn
    F = torch.nn.functional
    L, C, H, KV, T, V = p["layers"], p["width"], p["heads"], p["kv_heads"], p["context"], p["vocab"]
    FF, hs, g = ffn_hidden(p), C // H, H // KV
    if ckpt:
        import torch.utils.checkpoint  # noqa: F401 (torch.utils.checkpoint.checkpoint below)

    def linear(n_in, n_out):
        return nn.Linear(n_in, n_out, bias=False, device=device)

    def rotate_half(x):  # (.., hs): channel i pairs with i + hs/2
        return torch.cat((-x[..., hs // 2:], x[..., : hs // 2]), dim=-1)

    def attend(q, k, v):  # q (B,H,T,hs), k v (B,KV,T,hs) -> (B,H,T,hs)
        if attention == "sdpa-gqa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        if g > 1:  # key/value head j serves query heads g*j .. g*j+g-1
            k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        if attention == "sdpa-repeat":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        T_ = q.shape[2]
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B,H,T,T)
        causal = torch.ones(T_, T_, dtype=torch.bool, device=q.device).tril()
        return s.masked_fill(~causal, float("-inf")).softmax(dim=-1).to(v.dtype) @ v

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(C, device=device))

        def forward(self, x):  # (B,T,C); statistics in fp32 at least
            xf = x.to(torch.promote_types(x.dtype, torch.float32))
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
            return self.weight * y.to(x.dtype)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj = linear(C, H * hs), linear(C, KV * hs), linear(C, KV * hs)
            self.o_proj = linear(H * hs, C)

        def forward(self, x, cos, sin):  # x (B,T,C), cos sin (T,hs)
            B, T_, _ = x.shape
            q = self.q_proj(x).view(B, T_, H, hs).transpose(1, 2)
            k = self.k_proj(x).view(B, T_, KV, hs).transpose(1, 2)
            v = self.v_proj(x).view(B, T_, KV, hs).transpose(1, 2)
            cos, sin = cos.to(q.dtype), sin.to(q.dtype)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            return self.o_proj(attend(q, k, v).transpose(1, 2).reshape(B, T_, H * hs))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj, self.up_proj, self.down_proj = linear(C, FF), linear(C, FF), linear(FF, C)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):  # attribute order is the parameters' (symddp's arena) order
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm()
            self.mlp = MLP()

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, C, device=device)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])
            self.norm = RMSNorm()

    class LlamaForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Decoder()
            self.lm_head = linear(C, V)
            if p["tied"]:
                self.lm_head.weight = self.model.embed_tokens.weight  # named_parameters lists it once
            # rotary tables (T, hs): angle t * theta^(-2i/hs) for channels i and i + hs/2
            inv = float(p["rope_theta"]) ** -(torch.arange(0, hs, 2, dtype=torch.float64) / hs)
            ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
            ang = torch.cat((ang, ang), dim=-1)
            self.register_buffer("rope_cos", ang.cos().float().to(device), persistent=False)
            self.register_buffer("rope_sin", ang.sin().float().to(device), persistent=False)
            out_std = 0.02 / math.sqrt(2 * L)
            for name, w in self.named_parameters():
                if w.dim() >= 2:
                    std = out_std if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                    nn.init.normal_(w, mean=0.0, std=std)

        def forward(self, idx, targets=None):  # idx (B,T) -> loss, or logits (B,T,V) without targets
            T_ = idx.shape[1]
            cos, sin = self.rope_cos[:T_], self.rope_sin[:T_]
            x = self.model.embed_tokens(idx)
            for layer in self.model.layers:
                if ckpt:  # keep the layer's input only; recompute the rest in backward
                    x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
                else:
                    x = layer(x, cos, sin)
            logits = self.lm_head(self.model.norm(x))
            if targets is None:
                return logits
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))  # fp32 under autocast

    return LlamaForCausalLM()


def make_adamw(torch, model):
    """AdamW as symbench runs train's: decay on matrices only; fused where
    torch has it for the device, else its default implementation."""
    decay = [w for w in model.parameters() if w.dim() >= 2]
    no_decay = [w for w in model.parameters() if w.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    try:
        return torch.optim.AdamW(groups, fused=True, **kw), "fused"
    except (TypeError, RuntimeError, ValueError):  # 1.13 has no fused AdamW; older 2.x no fused on the CPU
        return torch.optim.AdamW(groups, **kw), "default"


def is_oom(torch, e):
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    return (oom and isinstance(e, oom)) or "out of memory" in str(e).lower()


def run_one(torch, a, name, p, B, mode, attention):
    """Times one configuration and prints its RESULT line."""
    cuda = a.device == "cuda"
    fp32 = mode == "fp32"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if mode.startswith("compile") and not hasattr(torch, "compile"):
        raise RuntimeError(f"torch.compile needs PyTorch 2.0 or later (this is {torch.__version__})")
    torch.manual_seed(1)
    model = build_model(torch, p, a.device, attention, ckpt=mode.endswith("-ckpt"))
    n_params = sum(w.numel() for w in model.parameters())
    opt, adamw = make_adamw(torch, model)
    fwd = torch.compile(model) if mode.startswith("compile") else model
    gen = torch.Generator(device=a.device)
    gen.manual_seed(2)
    T, V = p["context"], p["vocab"]
    data = torch.randint(0, V, (B, T + 1), device=a.device, generator=gen)
    x, y = data[:, :T].contiguous(), data[:, 1:].contiguous()

    def step():
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=not fp32):
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        sync()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.warmup):
        loss = step()
    sync()
    warm_s = time.perf_counter() - t0
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.steps):
            loss = step()
        end.record()
        sync()
        ms = start.elapsed_time(end) / a.steps
        peak_gib = torch.cuda.max_memory_allocated() / 2**30
    else:
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        ms = (time.perf_counter() - t0) * 1e3 / a.steps
        peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    tokens_per_s = B * T / (ms / 1e3)
    fpt = flops_per_token(p, n_params)
    peak = a.peak_tflops * 1e12 if a.peak_tflops else (PEAK_FP32 if fp32 else PEAK_BF16) if cuda else float("nan")
    mfu = fpt * tokens_per_s / peak
    print(f"RESULT torch_llama model=llama preset={name} layers={p['layers']} heads={p['heads']} "
          f"kv_heads={p['kv_heads']} width={p['width']} ffn={ffn_hidden(p)} context={T} vocab={V} "
          f"rope_theta={p['rope_theta']:.0f} tied={int(p['tied'])} batch={B} mode={mode} attention={attention} "
          f"adamw={adamw} device={a.device} ms_per_step={ms:.2f} tokens_per_s={tokens_per_s:.0f} mfu={mfu:.3f} "
          f"n_params={n_params} flops_per_token={fpt:.4g} peak_mem_gib={peak_gib:.2f} loss={loss.item():.4f} "
          f"warmup_s={warm_s:.1f} steps={a.steps}", flush=True)
    if a.profile and cuda:
        profile(torch, step, a.profile, f"preset={name} batch={B} mode={mode}", ms)


def profile(torch, step, top, label, ms):
    """Profiles 5 steps and prints the top kernels by CUDA time per step."""
    from torch.profiler import ProfilerActivity, profile as tprofile
    n = 5
    with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    rows = [(e.key, getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) / n, e.count / n)
            for e in prof.key_averages()]
    rows = [r for r in rows if r[1] > 0]
    print(f"PROFILE {label}: kernels {sum(r[1] for r in rows) / 1e3:.2f} ms per step (timed {ms:.2f} ms)", flush=True)
    for key, us, cnt in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"PROFILE {us:10.1f} us/step {cnt:6.1f}/step  {key[:120]}", flush=True)


def release(torch, cuda, compiled):
    """Frees what a run left behind, before the next one."""
    if compiled and hasattr(torch, "compile"):
        torch._dynamo.reset()  # its caches hold the compiled model
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def run_batches(torch, a, name, p, mode, batches, fit, attention):
    """Runs mode at each batch, or with fit the largest that fits; returns
    the number of failures."""
    cuda, failed = a.device == "cuda", 0
    order = sorted(set(batches), reverse=True) if fit else batches
    for i, B in enumerate(order):
        err, oom = None, False
        try:
            run_one(torch, a, name, p, B, mode, attention)
        except Exception as e:  # one failed configuration must not hide the others
            oom = is_oom(torch, e)
            err = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        release(torch, cuda, mode.startswith("compile"))  # after the except block, which held the frames
        if err is None:
            if fit:
                return failed
            continue
        more = fit and oom and i + 1 < len(order)
        note = f" (trying batch {order[i + 1]})" if more else " (no batch fits)" if fit and oom else ""
        print(f"ERROR torch_llama model=llama preset={name} batch={B} mode={mode}: {err}{note}", flush=True)
        if not more:
            failed += 1
            if fit:
                return failed
    return failed


def param_count(torch, runs):
    """Prints each model's PARAMS and PARAM lines (built on the meta device)."""
    for name, p in runs:
        model = build_model(torch, p, "meta", "math")
        named = list(model.named_parameters())
        n = sum(w.numel() for _, w in named)
        print(f"PARAMS torch_llama model=llama preset={name} layers={p['layers']} heads={p['heads']} "
              f"kv_heads={p['kv_heads']} width={p['width']} ffn={ffn_hidden(p)} context={p['context']} "
              f"vocab={p['vocab']} rope_theta={p['rope_theta']:.0f} tied={int(p['tied'])} n_params={n} "
              f"flops_per_token={flops_per_token(p, n)}", flush=True)
        for pname, w in named:
            print(f"PARAM {pname} {','.join(str(d) for d in w.shape)}")


def check_arena(torch, a, p):
    """--check-arena: symddp's parameters in this model, its float64 logits
    against symddp's. Returns the exit code."""
    def bad(msg):
        print(f"{PROG}: {msg}", file=sys.stderr)
        return 2

    try:
        tokens = [int(t) for t in a.tokens.split(",") if t.strip()]
        with open(a.check_arena, "rb") as f:
            arena = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
        with open(a.logits, "rb") as f:
            ours = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).double()
    except (OSError, ValueError) as e:
        return bad(f"--check-arena: {e}")
    V = p["vocab"]
    if not tokens or len(tokens) > p["context"] or any(t < 0 or t >= V for t in tokens):
        return bad(f"--tokens: want 1 to {p['context']} token ids below {V}")
    if ours.numel() != len(tokens) * V:
        return bad(f"--logits {a.logits}: {ours.numel()} floats, want {len(tokens)} tokens x {V}")
    model = build_model(torch, p, "cpu", pick_attention(torch, a.attention))
    named = list(model.named_parameters())
    n = sum(w.numel() for _, w in named)
    if arena.numel() != n:
        return bad(f"--check-arena {a.check_arena}: {arena.numel()} floats, the model has {n} parameters")
    off = 0
    with torch.no_grad():
        for _, w in named:
            w.copy_(arena[off:off + w.numel()].view(w.shape))
            off += w.numel()
        model = model.double()
        logits = model(torch.tensor([tokens]))[0].reshape(-1)
    diff = (logits - ours).abs().max().item()
    largest = logits.abs().max().item()
    rel = diff / largest if largest > 0 else diff
    ok = rel <= a.rtol
    print(json.dumps({"tokens": len(tokens), "vocab": V, "n_params": n, "max_abs_diff": diff,
                      "max_abs_logit": largest, "rel": rel, "rtol": a.rtol,
                      "argmax_last": int(logits.view(len(tokens), V)[-1].argmax()), "ok": ok}))
    return 0 if ok else 1


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="", help="all (tiny, llama-124m), or a comma list of tiny, llama-124m, llama3-1b")
    ap.add_argument("--modes", default="", help="comma list of " + ", ".join(MODES) + " (default eager,compile,fp32; eager,fp32 on the CPU)")
    ap.add_argument("--batch", default="", help="batch sizes (comma list), instead of the preset's")
    ap.add_argument("--fit", action="store_true", help="time only the largest batch that fits (llama3-1b's default)")
    for k in SIZE_FLAGS:
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=0)
    ap.add_argument("--tied", type=int, choices=(0, 1), default=None, help="tie the head to the embedding (custom sizes)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default 20, --quick 6)")
    ap.add_argument("--warmup", type=int, default=0, help="warm-up steps (default 5, --quick 3)")
    ap.add_argument("--quick", action="store_true", help="few steps")
    ap.add_argument("--attention", default="auto", choices=("auto", "gqa", "repeat", "math"))
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--peak-tflops", type=float, default=0, help="the peak that MFU is against (default H200's: 989 bf16, 67 fp32)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after timing, profile 5 steps (torch.profiler) and print the N kernels with the most CUDA time")
    ap.add_argument("--param-count", action="store_true", help="print the models' parameters (names, shapes, count) and exit")
    ap.add_argument("--check-arena", default="", metavar="FILE", help="compare the forward with symddp's over FILE's parameters (see above)")
    ap.add_argument("--tokens", default="", help="--check-arena's token ids (comma list)")
    ap.add_argument("--logits", default="", help="--check-arena's symddp logits (float32 file)")
    ap.add_argument("--rtol", type=float, default=1e-4, help="--check-arena's tolerance, relative to the largest |logit|")
    return ap.parse_args()


def resolve_runs(a):
    """The (name, sizes) of every model asked for."""
    preset = a.preset or ("tiny" if a.device == "cpu" or a.check_arena else "all")
    names = ALL if preset == "all" else [ALIASES.get(n, n) for n in preset.split(",") if n]
    for n in names:
        if n not in PRESETS:
            sys.exit(f"{PROG}: unknown preset {n!r} ({', '.join(PRESETS)}, or all)")
    custom = {k: getattr(a, k) for k in SIZE_FLAGS if getattr(a, k)}
    if a.tied is not None:
        custom["tied"] = bool(a.tied)
    if not custom:
        return [(n, dict(PRESETS[n])) for n in names]
    if preset != "all" and len(names) != 1:
        sys.exit(f"{PROG}: size flags change one preset: name one with --preset")
    p = dict(PRESETS["tiny" if preset == "all" else names[0]])
    p.update(custom)
    why = check_sizes(p)
    if why:
        sys.exit(f"{PROG}: custom model: {why}")
    return [("custom", p)]


def main():
    a = parse_args()
    runs = resolve_runs(a)
    import torch

    if a.param_count:
        param_count(torch, runs)
        return
    if a.check_arena:
        if len(runs) != 1:
            sys.exit(f"{PROG}: --check-arena checks one model: name one with --preset")
        sys.exit(check_arena(torch, a, runs[0][1]))
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"{PROG}: no CUDA device (--device cpu runs on the CPU)")
    a.steps = a.steps or (6 if a.quick else 20)
    a.warmup = a.warmup or (3 if a.quick else 5)
    modes = [m for m in (a.modes or ("eager,compile,fp32" if a.device == "cuda" else "eager,fp32")).split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit(f"{PROG}: unknown mode {m!r} ({', '.join(MODES)})")
    batches = []
    try:
        batches = [int(b) for b in a.batch.split(",") if b]
    except ValueError:
        sys.exit(f"{PROG}: --batch {a.batch!r}: want a comma list of whole numbers")
    if any(b < 1 for b in batches):
        sys.exit(f"{PROG}: --batch {a.batch!r}: want batches of at least 1")
    attention = pick_attention(torch, a.attention)
    where = torch.cuda.get_device_name(0) if a.device == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"torch {torch.__version__}, {where}, attention {attention}, steps {a.steps}, warm-up {a.warmup}", flush=True)
    failed = 0
    for name, p in runs:
        for mode in modes:
            failed += run_batches(torch, a, name, p, mode, batches or p["batches"][a.device], a.fit or p["fit"], attention)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
