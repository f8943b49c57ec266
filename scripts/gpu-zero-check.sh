#!/usr/bin/env bash
# gpu-zero-check.sh: the sharded update (ZeRO-1) on the GPU host (issue 20),
# after scripts/gpu-prepare.sh and scripts/gpu-compute-prepare.sh on the CPU
# machine (carry .device/bin and .device/data):
#
#    1 build            cuda/build.sh (build/libsymddp_cuda.so)
#    2 collectives      nvshmem.test: the reduce-scatter and all-gather
#                       kernels bit for bit against the allreduce, and the
#                       comm conformance suite (its ReduceScatter and
#                       AllGather checks), 2 PEs without MPS, 8 under MPS
#    3 shard update     cuda.test: the engine's update of one shard against
#                       the host's sharded update (3 engines on the GPU)
#    4 train            train --backend nvshmem --pes 8 under MPS, sharded
#                       (the default) and --shard-update=false, with
#                       SYMDDP_CUDA_TUNE=0: the mlp on Fashion-MNIST (the
#                       same parameter hash expected: no clipping), gpt-tiny
#                       on byte-level text, and GPT-2
#                       124M on synthetic tokens (device memory per PE:
#                       1/8 of the AdamW state each when sharded); gpt-tiny
#                       with --grad-dtype bf16 (sharded and not) and with
#                       --precision fp32 (the engine's operation groups)
#
# Usage: scripts/gpu-zero-check.sh [--budget SECONDS]; results in $OUT
# (default .device/out): zero-summary.txt, zero-tests.log, zero-train.log.
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
budget="${GPU_CHECK_BUDGET:-420}"
while [ "$#" -gt 0 ]; do
    case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --budget=*) budget="${1#*=}"; shift ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu-zero-check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

outdir="${OUT:-$root/.device/out}"
mkdir -p "$outdir"
build_log="$outdir/zero-build.log"
test_log="$outdir/zero-tests.log"
train_log="$outdir/zero-train.log"
mps_log="$outdir/zero-mps.log"
summary="$outdir/zero-summary.txt"
: >"$build_log"; : >"$test_log"; : >"$train_log"; : >"$mps_log"; : >"$summary"
start=$(date +%s)

# shellcheck source=scripts/gpu-lib.sh
. "$root/scripts/gpu-lib.sh"
gpu_env
note "GPU check of the sharded update (issue 20), $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s"
note "GPU: $(timeout 10 nvidia-smi -L 2>/dev/null | head -1)"
bin="$root/.device/bin"
gpu_binaries "$bin" nvshmem.test cuda.test train

# ---- 1 build ----
gpu_build "$build_log" 1

# ---- 2, 3 tests ----
coll='^(TestGPUShardedKernels|TestGPUConformance)$'
stage "collectives 2 PEs, no MPS" 120 "$test_log" env -C "$root/comm/nvshmem" SYMDDP_GPU_PES=2 \
    "$bin/nvshmem.test" -test.v=true -test.count=1 -test.timeout=110s -test.run "$coll"
stage "shard update (cuda.test)" 90 "$test_log" env -C "$root/compute/cuda" "$bin/cuda.test" \
    -test.v=true -test.count=1 -test.timeout=80s -test.run 'Shard'
trap gpu_mps_stop EXIT
gpu_mps_start "$mps_log"
if [ "$mps_up" = 1 ]; then
    # shellcheck disable=SC2046 # the variables are words without blanks
    stage "collectives 8 PEs, MPS" 120 "$test_log" env -C "$root/comm/nvshmem" $(mpsvars 8) \
        "$bin/nvshmem.test" -test.v=true -test.count=1 -test.timeout=110s -test.run "$coll"
    gpu_mps_stop
fi

# ---- 4 train, 8 PEs under the launcher's MPS daemon ----
data="$root/.device/data/fashion-mnist"
# SYMDDP_CUDA_TUNE=0: cuBLASLt's heuristic choice instead of timed picks
# (which vary with 8 PEs timing at once), so that the hashes of the two
# runs of each pair can be compared bit for bit.
export SYMDDP_CUDA_TUNE=0
common=(--backend nvshmem --pes 8 --mps on --no-progress --seed 1)
for shard in true false; do
    stage "mlp 8 PEs, shard-update=$shard" 90 "$train_log" "$bin/train" "${common[@]}" --model mlp \
        --data-dir "$data" --epochs 1 --shard-update="$shard"
done
for shard in true false; do
    stage "gpt-tiny 8 PEs, shard-update=$shard" 90 "$train_log" "$bin/train" "${common[@]}" --model gpt-tiny \
        --dataset text --data-dir "$root" --corpus-max 16MiB --max-steps 100 --eval-every 50 --sample-tokens 0 \
        --shard-update="$shard"
done
# gradients summed in bf16 (sharded and not: the same hash expected), and
# the GPT in fp32 on the engine's operation groups, sharded
for shard in true false; do
    stage "gpt-tiny 8 PEs, grad-dtype bf16, shard-update=$shard" 90 "$train_log" "$bin/train" "${common[@]}" \
        --model gpt-tiny --dataset text --data-dir "$root" --corpus-max 16MiB --max-steps 100 --eval-every 50 \
        --sample-tokens 0 --grad-dtype bf16 --shard-update="$shard"
done
stage "gpt-tiny 8 PEs, precision fp32, sharded" 120 "$train_log" "$bin/train" "${common[@]}" --model gpt-tiny \
    --dataset text --data-dir "$root" --corpus-max 16MiB --max-steps 100 --eval-every 50 --sample-tokens 0 \
    --precision fp32
for shard in true false; do
    stage "gpt2 8 PEs, synthetic, shard-update=$shard" 150 "$train_log" "$bin/train" "${common[@]}" --model gpt2 \
        --dataset synthetic --batch-size 8 --max-steps 10 --eval-every 0 --sample-tokens 0 --shard-update="$shard"
done

# ---- summary ----
{
    echo
    echo "---- tests: failures (first 60 lines) ----"
    grep -E -A6 '^\s*--- FAIL|^panic:|TIMED OUT|test timed out' "$test_log" | head -60
    echo "---- training runs ----"
    grep -E '^(=====|\[pe 0\] )?(training |done:|test accuracy|val loss|replicas|REPLICAS|device memory|msg="sharded|msg="model |train:|warning)' "$train_log" |
        sed -E 's/^===== ([^(]*) \(.*/== \1/'
} >>"$summary" 2>&1
echo
echo "==================== ZeRO-1 summary ($(elapsed)s) ===================="
cat "$summary"
