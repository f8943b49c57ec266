#!/usr/bin/env python3
"""PyTorch reference for `symbench gpu-train`: samples/s of the same MLP
training step (forward, softmax cross-entropy, backward, SGD with momentum
0.9) on one GPU, fp32 with TF32 off, timed with CUDA events after a warm-up:

  eager, graph  one synthetic batch resident in device memory, trained on
                again and again: eagerly, and replayed from a CUDA graph;
  fed           what symddp's `train` does every step (its training set in
                device memory, ddp's device step path): a new batch each
                step, gathered on the GPU from a synthetic training set of
                60,000 rows in device memory by indices that the host takes
                from a shuffled order and copies to the GPU on a copy
                stream while the previous step computes (two index slots,
                a CUDA graph per slot), as symddp's pipeline does.

    python3 bench/torch_mlp_bench.py [--configs 256x2/256,256x2/4096,...] [--time 1.0]

Configurations are WIDTHxLAYERS/BATCH: LAYERS hidden layers of WIDTH
between 784 inputs and 10 classes, Linear + ReLU each, as symddp's mlp.
Prints a table and one line per configuration for scripts:

    RESULT torch model=784-256-256-10 batch=256 eager=<samples/s> graph=<samples/s> fed=<samples/s>
"""
import argparse
import sys
import time

DEFAULT_CONFIGS = "256x2/256,256x2/4096,1024x4/1024,4096x4/4096"
ROWS = 60000  # the fed measurement's training set, as train --dataset synthetic
LR = 0.01


def parse_config(s):
    try:
        shape, batch = s.split("/")
        width, layers = shape.split("x")
        width, layers, batch = int(width), int(layers), int(batch)
    except ValueError:
        raise SystemExit(f"config {s!r}: want WIDTHxLAYERS/BATCH, e.g. 256x2/4096")
    if width < 1 or layers < 1 or batch < 1:
        raise SystemExit(f"config {s!r}: sizes must be positive")
    return [width] * layers, batch


def model_name(hidden):
    return "-".join(str(d) for d in [784, *hidden, 10])


def build(torch, hidden):
    nn = torch.nn
    layers, inp = [], 784
    for h in hidden:
        layers += [nn.Linear(inp, h), nn.ReLU()]
        inp = h
    layers.append(nn.Linear(inp, 10))
    return nn.Sequential(*layers).cuda()


def timed(torch, fn, warmup, target):
    """Seconds per call of fn after warmup calls, over enough calls to fill
    about target seconds, measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()

    def run(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    n = 4
    while True:
        d = run(n)
        if d >= target / 4 or n >= 1 << 20:
            n = max(1, int(n * target / max(d, 1e-9)))
            break
        n *= 4
    return run(n) / n


def bench(torch, hidden, batch, warmup, target):
    torch.manual_seed(1)
    x = torch.rand(batch, 784, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()
    out = {}

    # Eager.
    model = build(torch, hidden)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    out["eager"] = timed(torch, lambda: step(opt, model, loss_fn, x, y), warmup, target)

    # CUDA graph: warm up on a side stream (the momentum buffers come to
    # exist), then capture the whole step and replay it.
    model = build(torch, hidden)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(opt, model, loss_fn, x, y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = loss_fn(model(x), y)
        static_loss.backward()
        opt.step()
    out["graph"] = timed(torch, graph.replay, warmup, target)
    torch.cuda.synchronize()
    out["loss"] = float(static_loss.item())
    del graph, opt, model
    torch.cuda.empty_cache()
    out["fed"] = fed(torch, hidden, batch, loss_fn, warmup, target)
    torch.cuda.empty_cache()
    return out


def fed(torch, hidden, batch, loss_fn, warmup, target):
    """Seconds per step with a new batch every step (the "fed" measurement
    of the module's doc): a training set of ROWS rows in device memory, the
    batch gathered on the GPU by indices copied on a copy stream into one of
    two slots, each slot with its own captured graph."""
    data = torch.rand(ROWS, 784, device="cuda")
    labels = torch.randint(0, 10, (ROWS,), device="cuda")
    model = build(torch, hidden)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    idx = [torch.zeros(batch, dtype=torch.long, device="cuda") for _ in range(2)]
    host = [torch.zeros(batch, dtype=torch.long).pin_memory() for _ in range(2)]
    copier = torch.cuda.Stream()
    copied = [torch.cuda.Event() for _ in range(2)]
    consumed = [torch.cuda.Event() for _ in range(2)]

    def train_on(ix):
        loss_fn(model(data.index_select(0, ix)), labels.index_select(0, ix)).backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            train_on(idx[0])
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=True)
    graphs = [torch.cuda.CUDAGraph() for _ in range(2)]
    with torch.cuda.graph(graphs[0]):
        train_on(idx[0])
    opt.zero_grad(set_to_none=True)  # graph 1's backward writes its own gradients, not into graph 0's
    with torch.cuda.graph(graphs[1], pool=graphs[0].pool()):
        train_on(idx[1])
    gen = torch.Generator().manual_seed(2)
    order = torch.randperm(ROWS, generator=gen)
    state = {"k": 0, "pos": 0}
    main = torch.cuda.current_stream()

    def step():
        k = state["k"]
        s = k % 2
        if k >= 2:
            copied[s].synchronize()  # the slot's pinned indices were copied two steps ago
        if state["pos"] + batch > ROWS:  # a new epoch: a new order
            order.copy_(torch.randperm(ROWS, generator=gen))
            state["pos"] = 0
        host[s].copy_(order[state["pos"]:state["pos"] + batch])
        state["pos"] += batch
        with torch.cuda.stream(copier):
            if k >= 2:
                copier.wait_event(consumed[s])  # the step that read idx[s] is done
            idx[s].copy_(host[s], non_blocking=True)
            copied[s].record(copier)
        main.wait_event(copied[s])
        graphs[s].replay()
        consumed[s].record(main)
        state["k"] = k + 1

    t = timed(torch, step, warmup, target)
    torch.cuda.synchronize()
    del graphs, opt, model, data, labels
    return t


def step(opt, model, loss_fn, x, y):
    """One eager training step."""
    opt.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    opt.step()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help="WIDTHxLAYERS/BATCH, comma-separated")
    ap.add_argument("--time", type=float, default=1.0, help="timed seconds per measurement")
    ap.add_argument("--warmup", type=int, default=20, help="steps before timing")
    args = ap.parse_args()
    configs = [parse_config(s) for s in args.configs.split(",") if s]
    try:
        import torch
    except ImportError as e:
        print(f"torch_mlp_bench: no PyTorch: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_mlp_bench: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    # fp32 everywhere: no TF32 in matmuls or cuDNN.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    print("torch_mlp_bench: MLP training step (forward, cross-entropy, backward, SGD momentum 0.9), fp32,")
    print(f"TF32 off (matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}),"
          f" synthetic batch on the GPU; {args.warmup} warm-up steps, ~{args.time}s timed per measurement")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU: {torch.cuda.get_device_name(0)}")
    print()
    rows = []
    t0 = time.time()
    for hidden, batch in configs:
        r = bench(torch, hidden, batch, args.warmup, args.time)
        rows.append((hidden, batch, r))
    print(f"{'model':>26} {'batch':>6} {'eager samples/s':>16} {'graph samples/s':>16} {'graph step':>12}"
          f" {'fed samples/s':>14} {'fed step':>10} {'loss':>8}")
    for hidden, batch, r in rows:
        print(f"{model_name(hidden):>26} {batch:>6} {batch / r['eager']:>16.0f} {batch / r['graph']:>16.0f}"
              f" {r['graph'] * 1e6:>9.1f} us {batch / r['fed']:>14.0f} {r['fed'] * 1e6:>7.1f} us {r['loss']:>8.4f}")
    print()
    for hidden, batch, r in rows:
        print(f"RESULT torch model={model_name(hidden)} batch={batch} eager={batch / r['eager']:.0f} graph={batch / r['graph']:.0f}"
              f" fed={batch / r['fed']:.0f}")
    print(f"(took {time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
