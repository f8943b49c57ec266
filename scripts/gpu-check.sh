#!/usr/bin/env bash
# The GPU check of the nvshmem backend (issue 6), run on the GPU host from the
# repository root, in one go:
#
#   scripts/gpu-check.sh
#
# It needs .device/bin/ from scripts/gpu-prepare.sh (built on the CPU
# machine: the GPU host has no Go) and builds the library itself
# (cuda/build.sh). Stages, each with its own time limit, later ones tried
# even when earlier ones fail (but not without the library):
#    1 environment        GPU, driver, nvcc, NVSHMEM
#    2 build              cuda/build.sh -> build/libsymddp_cuda.so
#    3 unit               loader and Go-side tests on the fake library
#    4 conformance 1 PE   + GPU/runtime info
#    5 bench 1 PE         fused allreduce 4 KiB .. 1 GiB against the copy bandwidth
#    6 no MPS, 2 PEs      conformance and kernel checks (allreduce; reduce-scatter and
#                         all-gather against it) in NVSHMEM's limited-MPG mode
#    7 MPS                conformance with 2, 4 and 8 PEs, kernel checks with 4 and 8,
#                         the desync cases and a desync in a replayed CUDA graph
#                         with 8 (scripts/gpu-desync-check.sh runs more of it),
#                         the NVSHMEM paths (forced) with 2 and 4, latency and
#                         bandwidth with 2, 4 and 8 PEs beside NVSHMEM's reduction
#    8 failures           deadline naming the missing PE, a peer that exits, SIGKILL
#    9 no MPS, 4 and 8    conformance, if time is left
# Every command runs with NVSHMEM_DISABLE_NVLS=1 (NVLink multicast stays off)
# and under `timeout`; the whole run stays within GPU_CHECK_BUDGET seconds
# (default 450): a stage that would not fit is skipped and reported.
# Logs go to $OUT (the tool returns that folder), else .device/out: env.log,
# build.log, tests.log, bench.log, mps.log and summary.txt, which is also
# printed at the end.
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
outdir="${OUT:-$root/.device/out}"
mkdir -p "$outdir"
env_log="$outdir/env.log"
build_log="$outdir/build.log"
test_log="$outdir/tests.log"
bench_log="$outdir/bench.log"
mps_log="$outdir/mps.log"
summary="$outdir/summary.txt"
: >"$env_log"; : >"$build_log"; : >"$test_log"; : >"$bench_log"; : >"$mps_log"; : >"$summary"

budget="${GPU_CHECK_BUDGET:-450}"
start=$(date +%s)
bin="$root/.device/bin"

# shellcheck source=scripts/gpu-lib.sh
. "$root/scripts/gpu-lib.sh"
gpu_env
gpu_unpack "$bin" # the compute prepare script carries symbench as .xz
NV="$NVSHMEM_HOME"

# nvtest NAME LIMIT LOG [NAME=VALUE...] -- TESTFLAGS...: a stage running the
# nvshmem test binary in its package directory (as go test does), with the
# variables set, verbose, and its own timeout a little inside the stage's.
nvtest() {
    local name="$1" limit="$2" log="$3"
    shift 3
    local vars=()
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    stage "$name" "$limit" "$log" env -C "$root/comm/nvshmem" "${vars[@]}" "$bin/nvshmem.test" \
        -test.v=true -test.count=1 -test.timeout="$((limit - 5))s" "$@"
}

note "GPU check of the nvshmem backend, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s"

# ---- 1 environment ----
{
    echo "== nvidia-smi"; timeout 20 nvidia-smi || true
    echo "== nvidia-smi -L"; timeout 10 nvidia-smi -L || true
    echo "== nvcc"; timeout 10 nvcc --version || true
    echo "== NVSHMEM: ${NV:-not found}"; ls -l "${NV:-/nonexistent}/lib" 2>&1 | head -30
    echo "== gcc"; gcc --version 2>&1 | head -1
    echo "== binaries"; ls -l "$bin" 2>&1
    echo "== environment"; env | grep -E '^(NVSHMEM|SYMDDP|CUDA|LD_LIBRARY)' | sort
} >>"$env_log" 2>&1
note "GPU: $(timeout 10 nvidia-smi -L 2>/dev/null | head -1 || echo unknown); NVSHMEM: ${NV:-not found}"
if [ ! -x "$bin/nvshmem.test" ] || [ ! -x "$bin/symbench" ] || [ ! -x "$bin/cudalib.test" ]; then
    note "missing .device/bin binaries: run scripts/gpu-prepare.sh on the CPU machine and carry .device/bin"
fi

# ---- 2 build ----
gpu_build "$build_log" 1

# ---- 3 unit ----
stage "unit: loader (fake library)" 60 "$test_log" env -C "$root/internal/cudalib" \
    "$bin/cudalib.test" -test.v=true -test.count=1 -test.timeout=55s
nvtest "unit: nvshmem Go side (fake)" 60 "$test_log" -- -test.skip '^TestGPU'

# ---- 4 conformance, 1 PE ----
nvtest "conformance 1 PE + info" 120 "$test_log" SYMDDP_GPU_PES=1 -- -test.run '^(TestGPUInfo|TestGPUConformance)$'

# ---- 5 bench, 1 PE ----
stage "bench 1 PE f32 4KiB..1GiB" 150 "$bench_log" "$bin/symbench" gpu-allreduce --pes 1 --min 4KiB --max 1GiB --dtype f32
stage "bench 1 PE bf16 4KiB..1GiB" 120 "$bench_log" "$bin/symbench" gpu-allreduce --pes 1 --min 4KiB --max 1GiB --dtype bf16 --algos auto

# ---- 6 no MPS, 2 PEs (limited MPG) ----
nvtest "conformance 2 PEs, no MPS" 150 "$test_log" SYMDDP_GPU_PES=2 -- -test.run '^TestGPUConformance$'
nvtest "kernels 2 PEs, no MPS" 120 "$test_log" SYMDDP_GPU_PES=2 -- -test.run '^(TestGPUAllReduceKernels|TestGPUShardedKernels)$'

# ---- 7 MPS ----
trap gpu_mps_stop EXIT
if command -v nvidia-cuda-mps-control >/dev/null && [ $((budget - $(elapsed))) -gt 60 ]; then
    gpu_mps_start "$mps_log"
else
    note "MPS stages skipped (no nvidia-cuda-mps-control or no time left)"
fi
if [ "$mps_up" = 1 ]; then
    for n in 2 4 8; do
        # shellcheck disable=SC2046 # the variables are words without blanks
        nvtest "MPS conformance $n PEs" 90 "$test_log" $(mpsvars $n) -- -test.run '^TestGPUConformance$'
    done
    for n in 4 8; do
        nvtest "MPS kernels $n PEs" 90 "$test_log" $(mpsvars $n) -- -test.run '^(TestGPUAllReduceKernels|TestGPUShardedKernels)$'
    done
    # shellcheck disable=SC2046
    nvtest "MPS desync 8 PEs" 90 "$test_log" $(mpsvars 8) -- -test.run '^(TestGPUDesync|TestGPUDesyncInGraph)$'
    for n in 2 4; do
        nvtest "MPS NVSHMEM paths $n PEs" 90 "$test_log" $(mpsvars $n) -- -test.run '^TestGPUConformanceNVSHMEM$'
    done
    for n in 2 4 8; do
        # shellcheck disable=SC2046
        stage "MPS bench $n PEs 4KiB..256MiB" 90 "$bench_log" env $(mpsvars $n) \
            "$bin/symbench" gpu-allreduce --pes "$n" --min 4KiB --max 256MiB --algos auto --nvshmem --nvshmem-max 16MiB
    done
    gpu_mps_stop
fi

# ---- 8 failures (no MPS) ----
nvtest "failures: timeout, exit, SIGKILL" 120 "$test_log" -- \
    -test.run '^(TestGPUTimeoutNamesMissingPE|TestGPUPeerExit|TestGPUKilledPE)$'

# ---- 9 no MPS, 4 and 8 PEs, if time is left ----
for n in 4 8; do
    nvtest "conformance $n PEs, no MPS" 150 "$test_log" SYMDDP_GPU_PES=$n -- -test.run '^TestGPUConformance$'
done

# ---- summary ----
{
    echo
    echo "---- tests: failures (first 60 lines) ----"
    grep -E -A4 '^\s*--- FAIL|^panic:|TIMED OUT|test timed out' "$test_log" | head -60
    echo "---- tests: skips ----"
    grep -E -B1 -- '^--- SKIP' "$test_log" | grep -E '_test\.go:[0-9]+: ' |
        sed -E 's/^[[:space:]]+[a-z_]+_test\.go:[0-9]+: //' | sort | uniq -c | head -20
    echo "---- GPU info ----"
    grep -m1 -E 'gpu_test.go:[0-9]+: .*blocks per collective' "$test_log"
    echo "---- bench (PE 0's tables) ----"
    grep -vE '^(\+ |=====|symbench: nvshmem|\[pe [1-9])' "$bench_log" | grep -v '^$' | head -120
} >>"$summary" 2>&1
echo
echo "==================== summary ($(elapsed)s) ===================="
cat "$summary"
