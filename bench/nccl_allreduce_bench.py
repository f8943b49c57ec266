#!/usr/bin/env python3
"""NCCL reference for `symbench gpu-allreduce` on a host with several GPUs:
torch.distributed all_reduce (sum, float32, in place), one process per GPU,
for buffers of 4 KiB ... 1 GiB, timed with CUDA events after a warm-up; each
size is timed for about --time seconds and the slowest rank's time counts.

    python3 bench/nccl_allreduce_bench.py [--gpus N] [--min 4KiB] [--max 1GiB] [--time 0.2]

busbw = bytes * 2(N-1)/N / time (the nccl-tests convention). Prints a table
and one line per size for scripts:

    RESULT nccl gpus=N bytes=<bytes> time_us=<us> busbw_gbs=<GB/s>

NVLink multicast stays off (NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1): on the shared
test hosts it can put the GPUs out of service.
"""
import argparse
import os
import sys

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v


def parse_size(s):
    units = {"B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}
    t = s.strip().upper()
    for u in ("KIB", "MIB", "GIB", "B"):
        if t.endswith(u):
            return int(float(t[: -len(u)]) * units[u])
    return int(t)


def human(n):
    for u, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f and n % f == 0:
            return f"{n // f} {u}"
    return f"{n} B"


def worker(rank, world, sizes, seconds, port, queue):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    out = []
    for size in sizes:
        n = size // 4
        x = torch.ones(n, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        # size the timed run: calls that take about `seconds` together
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dist.all_reduce(x)
        stop.record()
        stop.synchronize()
        one = max(start.elapsed_time(stop) / 1e3, 1e-6)
        calls = int(max(5, min(5000, seconds / one)))
        calls = torch.tensor([calls], device="cuda")
        dist.all_reduce(calls, op=dist.ReduceOp.MAX)  # the same count on every rank
        calls = int(calls.item())
        dist.barrier()
        start.record()
        for _ in range(calls):
            dist.all_reduce(x)
        stop.record()
        stop.synchronize()
        t = torch.tensor([start.elapsed_time(stop) / 1e3 / calls], device="cuda", dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        out.append((size, float(t.item())))
        del x
    if rank == 0:
        queue.put(out)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=0, help="processes, one per GPU (default: every GPU)")
    ap.add_argument("--min", default="4KiB", help="smallest buffer")
    ap.add_argument("--max", default="1GiB", help="largest buffer")
    ap.add_argument("--step", type=int, default=4, help="factor between sizes")
    ap.add_argument("--time", type=float, default=0.2, help="seconds timed per size")
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    import torch
    import torch.multiprocessing as mp

    world = a.gpus or torch.cuda.device_count()
    if world < 2:
        print(f"nccl_allreduce_bench: {torch.cuda.device_count()} GPU(s): an allreduce across GPUs needs at least 2", file=sys.stderr)
        return 2
    sizes, s = [], parse_size(a.min)
    while s <= parse_size(a.max):
        sizes.append(s)
        s *= a.step
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.start_processes(worker, args=(world, sizes, a.time, a.port, q), nprocs=world, join=True, start_method="spawn")
    res = q.get()
    print(f"NCCL all_reduce (torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}), "
          f"float32 sum in place, {world} GPUs, one process each; busbw = bytes*2(N-1)/N / time")
    print(f"{'size':>10} {'time':>12} {'busbw':>12}")
    for size, t in res:
        busbw = size * 2 * (world - 1) / world / t / 1e9
        print(f"{human(size):>10} {t * 1e6:>10.1f} us {busbw:>8.2f} GB/s")
    for size, t in res:
        busbw = size * 2 * (world - 1) / world / t / 1e9
        print(f"RESULT nccl gpus={world} bytes={size} time_us={t * 1e6:.2f} busbw_gbs={busbw:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
