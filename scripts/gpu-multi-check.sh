#!/usr/bin/env bash
# The multi-GPU check (issue 11 (c), and issue 7's training with one PE per
# GPU), run on a host with two or more GPUs from the repository root:
#
#   scripts/gpu-multi-check.sh
#
# Prepare on the CPU machine, in this order (the first empties .device/bin):
#   scripts/gpu-prepare.sh && scripts/gpu-compute-prepare.sh
# and carry .device/bin and .device/data. Stages, each with its own time
# limit, later ones tried even when earlier ones fail:
#    1 environment     GPUs, driver, NVSHMEM
#    2 build           cuda/build.sh -> build/libsymddp_cuda.so
#    3 conformance     the comm conformance suite with one PE per GPU
#    4 kernels         the allreduce kernel checks, and the reduce-scatter and
#                      all-gather against the allreduce, with one PE per GPU
#    5 symbench        symbench all --skip allreduce,train: the fused allreduce
#                      beside NCCL (one table, busbw and ratio) and the
#                      training benchmark beside PyTorch
#    6 train           train --backend nvshmem --pes <GPUs> on Fashion-MNIST
# Every command runs with NVSHMEM_DISABLE_NVLS=1, NCCL_NVLS_ENABLE=0 and
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (NVLink multicast stays off) and under
# `timeout`; the whole run stays within GPU_CHECK_BUDGET seconds (default
# 420). Logs go to $OUT (the device tool returns that folder), else
# .device/out, named multi-* so that they do not overwrite gpu-check.sh's;
# multi-summary.txt is also printed at the end.
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
outdir="${OUT:-$root/.device/out}"
mkdir -p "$outdir"
summary="$outdir/multi-summary.txt"
test_log="$outdir/multi-tests.log"
bench_log="$outdir/multi-bench.log"
train_log="$outdir/multi-train.log"
build_log="$outdir/multi-build.log"
: >"$summary"; : >"$test_log"; : >"$bench_log"; : >"$train_log"; : >"$build_log"

budget="${GPU_CHECK_BUDGET:-420}"
start=$(date +%s)
bin="$root/.device/bin"
data="$root/.device/data/fashion-mnist"

# shellcheck source=scripts/gpu-lib.sh
. "$root/scripts/gpu-lib.sh"
gpu_env
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

note "multi-GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s"

# ---- 1 environment ----
gpus=$(timeout 10 nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
timeout 10 nvidia-smi -L 2>&1 | tee -a "$summary"
if [ "${gpus:-0}" -lt 2 ]; then
    note "this host has ${gpus:-0} GPU(s): the multi-GPU check needs 2 or more (scripts/gpu-check.sh covers one GPU)"
    exit 1
fi
note "NVSHMEM: ${NVSHMEM_HOME:-not found}; python: ${PY:-none}"
gpu_unpack "$bin"
for b in nvshmem.test symbench train; do
    [ -x "$bin/$b" ] || note "missing .device/bin/$b: run scripts/gpu-prepare.sh, then scripts/gpu-compute-prepare.sh, on the CPU machine"
done

# ---- 2 build ----
gpu_build "$build_log" 0

# ---- 3, 4 conformance and kernels, one PE per GPU ----
stage "conformance $gpus PEs (1 per GPU)" 90 "$test_log" env -C "$root/comm/nvshmem" SYMDDP_GPU_PES="$gpus" \
    "$bin/nvshmem.test" -test.v=true -test.count=1 -test.timeout=85s -test.run '^(TestGPUInfo|TestGPUConformance)$'
stage "kernels $gpus PEs (1 per GPU)" 90 "$test_log" env -C "$root/comm/nvshmem" SYMDDP_GPU_PES="$gpus" \
    "$bin/nvshmem.test" -test.v=true -test.count=1 -test.timeout=85s -test.run '^(TestGPUAllReduceKernels|TestGPUShardedKernels)$'

# ---- 5 symbench: allreduce beside NCCL, training beside PyTorch ----
stage "symbench all (GPU steps)" 200 "$bench_log" "$bin/symbench" all --skip allreduce,train \
    --out "$outdir/symbench" --python "${PY:-python3}" --scripts "$root/bench" \
    --gpu-allreduce-args "--min 4KiB --max 1GiB --algos auto"

# ---- 6 training, one PE per GPU ----
if [ -d "$data" ]; then
    stage "train nvshmem $gpus PEs (1 per GPU)" 120 "$train_log" "$bin/train" --backend nvshmem --pes "$gpus" \
        --bucket-size 0 --dataset fashion-mnist --data-dir "$data" --epochs 5 --no-progress --log-every 235 --seed 1
else
    note "train skipped: no $data (scripts/gpu-compute-prepare.sh copies it)"
fi

# ---- summary ----
{
    echo
    echo "---- tests: failures (first 40 lines) ----"
    grep -E -A4 '^\s*--- FAIL|^panic:|TIMED OUT|test timed out' "$test_log" | head -40
    echo "---- allreduce beside NCCL ----"
    report="$outdir/symbench/REPORT.md"
    if [ -f "$report" ]; then
        sed -n '/^side by side (busbw/,/^$/p' "$report"
        sed -n '/^side by side (samples/,/^$/p' "$report"
    else
        echo "no $report: see multi-bench.log"
    fi
    echo "---- train ----"
    grep -E '^(done:|stopped|test accuracy|replicas|REPLICAS|train:)' "$train_log" | head -10
} >>"$summary" 2>&1
echo
echo "==================== summary ($(elapsed)s) ===================="
cat "$summary"
