#!/usr/bin/env python3
"""Trains bench/torch_llama_bench.py's Llama on llm.c token shards with the
recipe `train` runs, and prints its validation loss: the PyTorch side of
issue 39's loss-parity check (scripts/gpu-lm-check.sh runs both sides on
the same shards and prints them side by side).

The model is torch_llama_bench.py's (the same layers, parameter names,
initialisation and AdamW groups as symddp's Llama); the recipe is train's,
flag for flag:

  --lr, --min-lr, --warmup   linear warm-up from 0 over --warmup steps to
                             --lr, then cosine down to --min-lr at the last
                             step (optim.NewSchedule("cosine") with Warmup)
  --beta2, --weight-decay    AdamW, betas (0.9, beta2), eps 1e-8, decay on
                             matrices only
  --clip                     global gradient norm clipped to it (0: off)
  --batch, --steps           sequences per step, optimizer steps
  --eval-every, --eval-batches
                             validation on the first eval-batches x batch
                             windows of the validation shards, in order (as
                             train's Evaluate reads them), every eval-every
                             steps and after the last

Windows are train's: each shard is cut into windows of context+1 tokens
starting every context tokens (the last (n-1) mod context tokens of a shard
of n are in none); the training windows are drawn without replacement in a
shuffled order per epoch (train's sampler shuffles too, with its own
generator: the two sides see the same tokens in another order).

Output, one line each:
  EVAL torch_llama_train step=S val_loss=X
  RESULT torch_llama_train preset=P steps=N batch=B val_loss=X train_loss=Y tokens_per_s=Z

Examples:
  /opt/torch/.venv/bin/python3 bench/torch_llama_train.py --preset llama-124m \\
      --train-shards 'tok/py_train_*.bin' --val-shards 'tok/py_val_*.bin' --steps 1000 --batch 16
  python3 bench/torch_llama_train.py --device cpu --preset tiny --train-shards ... --steps 50 --batch 4
"""
import argparse
import glob
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama_bench as tlb  # noqa: E402 (the model, its presets and AdamW groups)

PROG = "torch_llama_train.py"
MAGIC_U16, VERSION_U16 = 20240520, 1
MAGIC_U32, VERSION_U32 = 20240801, 7


def fail(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(2)


def read_shard(path, vocab):
    """The tokens of one llm.c shard (uint16 or uint32 as its magic says)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 1024:
        fail(f"{path}: {len(data)} bytes, shorter than a shard's header")
    head = np.frombuffer(data[:1024], dtype="<i4")
    magic, version, n = int(head[0]), int(head[1]), int(head[2])
    if (magic, version) == (MAGIC_U16, VERSION_U16):
        dtype, size = "<u2", 2
    elif (magic, version) == (MAGIC_U32, VERSION_U32):
        dtype, size = "<u4", 4
    else:
        fail(f"{path}: magic {magic} version {version}: not an llm.c token shard")
    if len(data) != 1024 + n * size:
        fail(f"{path}: header says {n} tokens, the file holds {(len(data) - 1024) // size}")
    tokens = np.frombuffer(data[1024:], dtype=dtype).astype(np.int64)
    if n and int(tokens.max()) >= vocab:
        fail(f"{path}: token {int(tokens.max())} outside the vocabulary of {vocab}")
    return tokens


def windows(pattern, context, vocab, split):
    """The split's windows, as (tokens of every shard, [(shard, start)])."""
    files = sorted(glob.glob(pattern))
    if not files:
        fail(f"--{split}-shards {pattern}: no file matches")
    shards, index = [], []
    for s, path in enumerate(files):
        t = read_shard(path, vocab)
        shards.append(t)
        index.extend((s, k * context) for k in range((len(t) - 1) // context))
    if not index:
        fail(f"--{split}-shards {pattern}: no window of {context + 1} tokens")
    return shards, index


def batch_of(torch, shards, picks, context, device):
    rows = np.stack([shards[s][i : i + context + 1] for s, i in picks])
    t = torch.from_numpy(rows).to(device)
    return t[:, :context].contiguous(), t[:, 1:].contiguous()


def lr_at(a, step):
    """train's schedule at optimizer step step (from 1): warm-up, then cosine."""
    if step <= a.warmup:
        return a.lr * step / a.warmup
    total = a.steps - a.warmup
    t = min(step - a.warmup - 1, total)
    return a.min_lr + (a.lr - a.min_lr) * (1 + math.cos(math.pi * t / total)) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="llama-124m", help="tiny, llama-124m or llama3-1b (torch_llama_bench.py's)")
    ap.add_argument("--train-shards", required=True)
    ap.add_argument("--val-shards", required=True)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--min-lr", type=float, default=0.0)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--mode", default="compile", choices=("eager", "compile", "fp32"),
                    help="bf16 autocast eager or under torch.compile, or fp32 eager")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.preset not in tlb.PRESETS and a.preset not in tlb.ALIASES:
        fail(f"--preset {a.preset}: want one of {', '.join(tlb.PRESETS)}")
    if a.steps < 1 or a.batch < 1 or a.warmup < 0 or a.warmup >= a.steps or a.eval_batches < 1:
        fail("want --steps >= 1, --batch >= 1, 0 <= --warmup < --steps, --eval-batches >= 1")

    import torch

    p = dict(tlb.PRESETS[tlb.ALIASES.get(a.preset, a.preset)])
    T, V = p["context"], p["vocab"]
    train, train_idx = windows(a.train_shards, T, V, "train")
    val, val_idx = windows(a.val_shards, T, V, "val")
    val_idx = val_idx[: a.eval_batches * a.batch]
    cuda = a.device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(a.seed)
    model = tlb.build_model(torch, p, a.device, tlb.pick_attention(torch, "auto"))
    opt, _ = tlb.make_adamw(torch, model)
    for g in opt.param_groups:
        g["betas"] = (0.9, a.beta2)
        if g["weight_decay"]:
            g["weight_decay"] = a.weight_decay
    fwd = torch.compile(model) if a.mode == "compile" else model
    autocast = a.mode != "fp32"

    def evaluate():
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            for k in range(0, len(val_idx), a.batch):
                x, y = batch_of(torch, val, val_idx[k : k + a.batch], T, a.device)
                with torch.autocast(a.device, dtype=torch.bfloat16, enabled=autocast):
                    loss = fwd(x, y)
                total, n = total + loss.item() * len(x), n + len(x)
        model.train()
        return total / n

    gen = np.random.default_rng(a.seed)
    order, pos = gen.permutation(len(train_idx)), 0
    val_loss, loss, t0 = float("nan"), None, time.perf_counter()
    for step in range(1, a.steps + 1):
        if pos + a.batch > len(order):
            order, pos = gen.permutation(len(train_idx)), 0
        x, y = batch_of(torch, train, [train_idx[i] for i in order[pos : pos + a.batch]], T, a.device)
        pos += a.batch
        for g in opt.param_groups:
            g["lr"] = lr_at(a, step)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=autocast):
            loss = fwd(x, y)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % a.eval_every == 0 or step == a.steps:
            val_loss = evaluate()
            print(f"EVAL torch_llama_train step={step} val_loss={val_loss:.4f} train_loss={loss.item():.4f}", flush=True)
    if cuda:
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    print(f"RESULT torch_llama_train preset={a.preset} steps={a.steps} batch={a.batch} context={T} mode={a.mode} "
          f"device={a.device} val_loss={val_loss:.4f} train_loss={loss.item():.4f} "
          f"tokens_per_s={a.steps * a.batch * T / secs:.0f} seconds={secs:.1f}", flush=True)


if __name__ == "__main__":
    main()
