#!/usr/bin/env bash
# The GPU check of the compute side (issue 7: training on the GPU), run on the
# GPU host from the repository root, in one go:
#
#   scripts/gpu-compute-check.sh [--data-dir DIR] [--budget SECONDS] [--rebuild] [--no-torch]
#
# It needs .device/bin/ from scripts/gpu-compute-prepare.sh (built on the CPU
# machine: the GPU host has no Go; binaries raw or .xz, unpacked in place)
# and the Fashion-MNIST
# .gz files (--data-dir, default .device/data/fashion-mnist, else
# /usr/share/datasets/fashion-mnist). It builds the library with cuda/build.sh
# unless build/libsymddp_cuda.so is newer than every cuda/ source (--rebuild
# forces it). Stages, each with its own time limit, later ones tried even when
# earlier ones fail (but not without the library):
#    1 environment      GPU, driver, nvcc, PyTorch
#    2 build            cuda/build.sh -> build/libsymddp_cuda.so (when needed)
#    3 engine tests     conformance suite on the CUDA engine (with the GPT's
#                       operation groups in fp32: layer norm, GELU, gathers,
#                       attention; their kernels against the CPU engine's
#                       bits; the bf16 casts bit for bit); optimizer kernels
#                       against optim's Update bit for bit (sgd, momentum,
#                       nesterov, adam, adamw, with and without weight decay,
#                       aligned and not, clipped); non-finite skip and halt;
#                       the sharded update (ZeRO-1: 3 shards, sums of squares
#                       gathered, SGD momentum and AdamW against the host's
#                       sharded update bit for bit, captured too);
#                       20 mlp steps against the CPU engine (losses printed),
#                       eager and replayed from a CUDA graph
#    4 trainer test     ddp's GPU step path (pipeline, graphs) against the CPU path
#    5 train 1 PE       train --backend nvshmem --pes 1 on Fashion-MNIST, 5 epochs
#    6 train 8 PEs      the same with 8 PEs on the one GPU (under MPS when the
#                       daemon is there, which makes it much faster)
#    7 bench            symbench gpu-train: samples/s of train --backend nvshmem
#                       --pes 1, eager and CUDA graph, of 784-256-256-10 at
#                       batch 256 and 4096, 784-1024x4-10 at 1024,
#                       784-4096x4-10 at 4096, fp32 without TF32
#    8 PyTorch          bench/torch_mlp_bench.py: the same four, same run (graph: one
#                       resident batch; fed: a new batch each step, as train)
#    9 train CPU        train --backend shm --pes 8 on the same data, for the
#                       CPU path's accuracy beside the GPU's (if time is left)
# Every command runs with NVSHMEM_DISABLE_NVLS=1 and under `timeout`; the
# whole run stays within the budget (default 330 s): a stage that would not
# fit is skipped and reported. Logs go to $OUT (else .device/out): compute-
# env.log, compute-build.log, compute-tests.log, compute-train.log,
# compute-bench.log and compute-summary.txt, printed at the end, with the
# benchmark table of both columns side by side.
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
data=""
budget="${GPU_CHECK_BUDGET:-330}"
rebuild=0
torch=1
while [ "$#" -gt 0 ]; do
    case "$1" in
    --data-dir) data="$2"; shift 2 ;;
    --data-dir=*) data="${1#*=}"; shift ;;
    --budget) budget="$2"; shift 2 ;;
    --rebuild) rebuild=1; shift ;;
    --no-torch) torch=0; shift ;;
    -h | --help) sed -n '2,45p' "$0"; exit 0 ;;
    *) echo "gpu-compute-check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$data" ]; then
    data="$root/.device/data/fashion-mnist"
    [ -d "$data" ] || data=/usr/share/datasets/fashion-mnist
fi
data="$(cd "$data" 2>/dev/null && pwd || echo "$data")"

outdir="${OUT:-$root/.device/out}"
mkdir -p "$outdir"
env_log="$outdir/compute-env.log"
build_log="$outdir/compute-build.log"
test_log="$outdir/compute-tests.log"
train_log="$outdir/compute-train.log"
bench_log="$outdir/compute-bench.log"
summary="$outdir/compute-summary.txt"
: >"$env_log"; : >"$build_log"; : >"$test_log"; : >"$train_log"; : >"$bench_log"; : >"$summary"
start=$(date +%s)

# shellcheck source=scripts/gpu-lib.sh
. "$root/scripts/gpu-lib.sh"
gpu_env

note "GPU check of the compute side (issue 7), $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s"

# ---- 1 environment ----
gpu_env_report "$env_log" "== data: $data" "$(ls -l "$data" 2>&1)"
note "GPU: $(timeout 10 nvidia-smi -L 2>/dev/null | head -1 || echo unknown); data: $data"

# The binaries: raw in .device/bin, or unpacked there from .xz (all of them,
# so that scripts/gpu-check.sh finds its own raw too).
bin="$root/.device/bin"
gpu_binaries "$bin" cuda.test ddp.test train symbench

# ---- 2 build ----
gpu_build "$build_log" "$rebuild"

# ---- 3 engine tests ----
stage "engine: conformance, bits, CPU" 150 "$test_log" env -C "$root/compute/cuda" "$bin/cuda.test" \
    -test.v=true -test.count=1 -test.timeout=140s -test.run 'GPU$'

# ---- 4 trainer test ----
stage "ddp: GPU step path vs CPU" 90 "$test_log" env -C "$root/ddp" "$bin/ddp.test" \
    -test.v=true -test.count=1 -test.timeout=80s -test.run '^TestGPUFitMatchesCPU$'

# ---- 5, 6 training on Fashion-MNIST ----
train_args=(--dataset fashion-mnist --data-dir "$data" --epochs 5 --no-progress --log-every 235 --seed 1)
# One stream carries compute and collectives: one allreduce after backward
# (--bucket-size 0) rather than buckets that cannot overlap anyway.
stage "train nvshmem 1 PE" 120 "$train_log" "$bin/train" --backend nvshmem --pes 1 --bucket-size 0 "${train_args[@]}"

# 8 PEs on the one GPU: the launcher starts its own MPS daemon (--mps on)
# and stops it at the end (issue 13); then the same for 60 steps with
# --mps off (time-sliced), for samples/s beside it.
stage "train nvshmem 8 PEs, MPS on" 150 "$train_log" "$bin/train" --backend nvshmem --pes 8 --mps on --bucket-size 0 "${train_args[@]}"
stage "train nvshmem 8 PEs, 300 steps, MPS on" 60 "$train_log" "$bin/train" --backend nvshmem --pes 8 --mps on --bucket-size 0 \
    "${train_args[@]}" --max-steps 300 --log-every 100 --eval-every 0
stage "train nvshmem 8 PEs, 300 steps, MPS off" 90 "$train_log" "$bin/train" --backend nvshmem --pes 8 --mps off --bucket-size 0 \
    "${train_args[@]}" --max-steps 300 --log-every 100 --eval-every 0
left=$(pgrep nvidia-cuda-mps | wc -l) # by process name: -f would also match command lines that mention it
note "MPS processes left after the launcher-managed runs: $left"

# ---- mpirun: NVSHMEM bootstraps through MPI (issue 8) ----
if command -v mpirun >/dev/null; then
    stage "mpirun -np 2 train nvshmem (MPI bootstrap)" 90 "$train_log" mpirun --allow-run-as-root --oversubscribe -np 2 \
        -x NVSHMEM_DISABLE_NVLS=1 -x LD_LIBRARY_PATH -x SYMDDP_CUDA_LIB -x NVSHMEM_REMOTE_TRANSPORT \
        "$bin/train" --backend nvshmem --bucket-size 0 "${train_args[@]}" --epochs 1
fi

# ---- 7, 8 bench, both columns from this run ----
# gpu-train runs the product: $bin/train --backend nvshmem --pes 1, once per
# model and mode (8 runs, each with its start-up), timed over 1000 steps.
stage "bench symddp gpu-train" 150 "$bench_log" "$bin/symbench" gpu-train --train-bin "$bin/train" --warmup 100 --steps 1000
if [ "$torch" = 1 ] && [ -n "$PY" ]; then
    stage "bench PyTorch" 120 "$bench_log" "$PY" bench/torch_mlp_bench.py --time 1.0
else
    note "PyTorch bench skipped"
fi

# ---- 9 the CPU path's accuracy on the same data, if time is left ----
stage "train CPU shm 8 PEs" 100 "$train_log" "$bin/train" --backend shm --pes 8 "${train_args[@]}"

# ---- summary ----
{
    echo
    echo "---- tests: failures (first 60 lines) ----"
    grep -E -A6 '^\s*--- FAIL|^panic:|TIMED OUT|test timed out' "$test_log" | head -60
    echo "---- tests: skips ----"
    grep -E -B1 -- '--- SKIP' "$test_log" | grep -E '_test\.go:[0-9]+: ' | sed -E 's/^[[:space:]]+//' | sort | uniq -c | head -10
    echo "---- 20 mlp steps: loss CPU / GPU / GPU graph ----"
    grep -E 'train_test.go:[0-9]+: (step|largest)' "$test_log" | sed -E 's/^[[:space:]]+train_test.go:[0-9]+: //' | head -22
    echo "---- training runs (Fashion-MNIST, 5 epochs) ----"
    grep -E '^(=====|done:|stopped|test accuracy|replicas|REPLICAS|train:|compute engine|GPU step path|CUDA graph)' "$train_log" |
        sed -E 's/^===== ([^(]*) \(.*/== \1/'
    echo "---- bench: samples/s, fp32 without TF32, one GPU ----"
    grep -E '^RESULT (symddp|torch) ' "$bench_log" | awk '
        { who = $2; key = ""; e = ""; g = ""; f = "";
          for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "model") m = kv[2]; else if (kv[1] == "batch") b = kv[2];
                                      else if (kv[1] == "eager") e = kv[2]; else if (kv[1] == "graph") g = kv[2];
                                      else if (kv[1] == "fed") f = kv[2] }
          key = m " " b; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
          E[who, key] = e; G[who, key] = g; F[who, key] = f }
        END {
          printf "%-30s %6s %14s %14s %14s %14s %14s %9s %9s  %s\n", "model", "batch", "symddp eager", "symddp graph", "torch eager", "torch graph", "torch fed", "graph/pt", "graph/fed", "target"
          for (i = 0; i < n; i++) { split(order[i], mb, " "); k = order[i]
            r = (G["torch", k] > 0 && G["symddp", k] > 0) ? sprintf("%.2fx", G["symddp", k] / G["torch", k]) : "-"
            rf = (F["torch", k] > 0 && G["symddp", k] > 0) ? sprintf("%.2fx", G["symddp", k] / F["torch", k]) : "-"
            t = (mb[1] ~ /^784-256-/) ? ">= 2x" : (mb[1] ~ /4096/) ? ">= 0.95x" : ""
            printf "%-30s %6s %14s %14s %14s %14s %14s %9s %9s  %s\n", mb[1], mb[2], E["symddp", k], G["symddp", k], E["torch", k], G["torch", k], F["torch", k], r, rf, t } }'
    echo "(the tables of both benchmarks are in compute-bench.log)"
} >>"$summary" 2>&1
echo
echo "==================== compute summary ($(elapsed)s) ===================="
cat "$summary"
