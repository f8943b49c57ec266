#!/usr/bin/python3
"""PyTorch CPU peer for symddp's CPU language-model benchmark (symbench
gpt-cpu): tokens/s of data-parallel training of "gpt-tiny" or "llama-tiny"
with DistributedDataParallel over gloo, one thread per rank, on synthetic
random byte tokens.

    /usr/bin/python3 bench/torch_gpt_cpu_bench.py [--model gpt-tiny|llama-tiny]
        [--ranks 1,2,4] [--batch 8] [--warmup 3] [--steps 10] [--seed 1]
        [--expect-params N]

Needs Debian's PyTorch (`apt-get install -y python3-torch`, 1.13, which has
no scaled_dot_product_attention: attention is written out with a causal mask
and softmax). The script starts its ranks itself with torch.multiprocessing,
one rank count after the other.

gpt-tiny (written here): 4 pre-LayerNorm blocks of width 128 with 4 heads,
context 128, byte vocabulary 256, learned position embedding, GELU (tanh
approximation) MLP of width 512, output head tied to the token embedding,
GPT-2 init (normal 0.02, residual projections 0.02/sqrt(2·layers), zero
biases, unit LayerNorm).

llama-tiny (torch_llama_bench.py's model, preset tiny, whose parameters,
initialisation and forward bench/torch_llama_bench_test.go checks against
symddp's models.Llama): 4 pre-RMSNorm blocks (eps 1e-5) of width 128 with 4
query and 2 key/value heads, rotary embedding (theta 10000) on q and k,
SwiGLU of hidden width 352, no biases, no learned positions, context 128,
byte vocabulary 256, untied output head; N(0, 0.02) init, o_proj and
down_proj N(0, 0.02/sqrt(2·layers)), unit gains. Attention is its "math"
path: each key/value head is repeated for the query heads it serves
(repeat_interleave), then the causal mask, softmax and two matmuls, as
gpt-tiny's.

Both: AdamW lr 1e-3 (train's default), betas 0.9/0.95, eps 1e-8, weight
decay 0.1 on matrices (embeddings and linear weights) only, no clipping.
Each step: zero grads, forward, mean cross-entropy over every position,
backward (DDP averages the gradients), AdamW step. DDP does not broadcast
buffers each step (llama-tiny's rotary tables are constants).

Each rank trains on its own batch of --batch sequences (global batch
ranks·batch); after --warmup steps and a barrier, --steps steps are timed.
With --expect-params N the script exits 2 before training when the model
has another number of parameters (symbench passes symddp's count). One line
per rank count, for scripts:

    torch-gpt model=llama-tiny params=803968 ranks=2 batch_per_rank=8 context=128
        steps=10 tokens_per_s=<global> ms_per_step=<ms> loss=<last> peak_rss_mib=<rank0>,<rank1>

(on one line), where tokens_per_s counts the input tokens of all ranks,
ranks·batch·context per step, and peak_rss_mib is each rank's maximum
resident set size (torch's import included).
"""
import argparse
import math
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama_bench as tlb  # noqa: E402 (llama-tiny: the model the Llama checks hold to symddp's)

GPT_TINY = dict(layers=4, heads=4, width=128, context=128, vocab=256)
# The Llama preset's sizes, without torch_llama_bench's batch settings.
LLAMA_TINY = {k: v for k, v in tlb.PRESETS["tiny"].items() if k not in ("batches", "fit")}
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.95), 1e-8, 0.1


def build_gpt(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            c = cfg["width"]
            self.heads = cfg["heads"]
            self.qkv = nn.Linear(c, 3 * c)
            self.proj = nn.Linear(c, c)
            t = cfg["context"]
            # A plain attribute, not a buffer: gloo cannot broadcast bool tensors.
            self.mask = torch.tril(torch.ones(t, t, dtype=torch.bool)).view(1, 1, t, t)

        def forward(self, x):  # x is (B, T, C)
            b, t, c = x.shape
            hs = c // self.heads
            q, k, v = self.qkv(x).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, hs).transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hs)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
            att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            c = cfg["width"]
            self.ln1 = nn.LayerNorm(c)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(c)
            self.fc = nn.Linear(c, 4 * c)
            self.fc_proj = nn.Linear(4 * c, c)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            c = cfg["width"]
            self.wte = nn.Embedding(cfg["vocab"], c)
            self.wpe = nn.Embedding(cfg["context"], c)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg["layers"]))
            self.ln_f = nn.LayerNorm(c)
            self.apply(self._init)
            for name, p in self.named_parameters():
                if name.endswith("proj.weight"):  # the residual projections
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg["layers"]))

        @staticmethod
        def _init(m):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets):  # idx, targets are (B, T)
            t = idx.shape[1]
            pos = torch.arange(t, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()  # tied head: (B, T, vocab)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT()


def build_llama(torch, cfg):
    return tlb.build_model(torch, cfg, "cpu", "math")


# The models by symddp's names: their sizes (context and vocab used here)
# and builders, each model's forward(idx, targets) returning the mean loss.
MODELS = {"gpt-tiny": (GPT_TINY, build_gpt), "llama-tiny": (LLAMA_TINY, build_llama)}


def adamw(torch, model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": rest, "weight_decay": 0.0}], lr=LR, betas=BETAS, eps=EPS)


def rank_main(rank, ranks, port, args, results):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    cfg, build = MODELS[args.model]
    # No buffer changes in training (llama-tiny's rotary tables are
    # constants): nothing to broadcast before every forward.
    model = DDP(build(torch, cfg), broadcast_buffers=False)
    opt = adamw(torch, model)
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    t = cfg["context"]
    pool = [torch.randint(0, cfg["vocab"], (args.batch, t + 1), generator=gen) for _ in range(4)]

    def step(i):
        seq = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        opt.step()
        return loss

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    start = time.perf_counter()
    for i in range(args.steps):
        loss = step(i)
    dist.barrier()
    elapsed = time.perf_counter() - start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    params = sum(p.numel() for p in model.parameters())
    results.put((rank, elapsed, float(loss.item()), rss_mib, params))
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_ranks(s):
    try:
        ranks = [int(r) for r in s.split(",")]
    except ValueError:
        raise SystemExit(f"--ranks {s!r}: want a comma-separated list of rank counts, e.g. 1,2,4")
    if not ranks or min(ranks) < 1:
        raise SystemExit(f"--ranks {s!r}: rank counts must be positive")
    return ranks


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="gpt-tiny", choices=sorted(MODELS), help="model to train (default gpt-tiny)")
    p.add_argument("--ranks", default="1,2,4", help="rank counts to run, one after the other (default 1,2,4)")
    p.add_argument("--batch", type=int, default=8, help="sequences per rank and step (default 8)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--expect-params", type=int, default=0, metavar="N",
                   help="exit 2 before training unless the model has N parameters (symddp's count)")
    args = p.parse_args()
    ranks_list = parse_ranks(args.ranks)
    if args.batch < 1 or args.steps < 1 or args.warmup < 0:
        raise SystemExit("--batch and --steps must be positive, --warmup not negative")
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        raise SystemExit("PyTorch is not installed for this python: apt-get install -y python3-torch, "
                         "then run /usr/bin/python3 " + sys.argv[0])
    cfg, build = MODELS[args.model]
    params = sum(w.numel() for w in build(torch, cfg).parameters())
    if args.expect_params and params != args.expect_params:
        print(f"{sys.argv[0]}: --model {args.model} has {params} parameters here, symddp's has {args.expect_params}: "
              "not the same model", file=sys.stderr)
        sys.exit(2)
    print(f"# torch {torch.__version__}, model {args.model} {cfg}, {params} parameters, {os.cpu_count()} CPUs", flush=True)
    ctx = mp.get_context("spawn")
    for ranks in ranks_list:
        results = ctx.SimpleQueue()
        mp.start_processes(rank_main, args=(ranks, free_port(), args, results), nprocs=ranks,
                           join=True, start_method="spawn")
        got = sorted(results.get() for _ in range(ranks))
        elapsed = max(r[1] for r in got)
        tokens = ranks * args.batch * cfg["context"] * args.steps
        rss = ",".join(f"{r[3]:.1f}" for r in got)
        print(f"torch-gpt model={args.model} params={got[0][4]} ranks={ranks} batch_per_rank={args.batch} "
              f"context={cfg['context']} steps={args.steps} tokens_per_s={tokens / elapsed:.1f} "
              f"ms_per_step={1000 * elapsed / args.steps:.1f} loss={got[0][2]:.4f} peak_rss_mib={rss}", flush=True)


if __name__ == "__main__":
    main()
