#!/usr/bin/env bash
# gpu-desync-check.sh: desync detection of the nvshmem backend on the GPU
# host (issue 37, part 5), after scripts/gpu-prepare.sh (nvshmem.test) and
# scripts/gpu-compute-prepare.sh (train) on the CPU machine; carry
# .device/bin. Stages, by priority (a stage that no longer fits the budget
# is skipped and says so):
#
#    1 build            cuda/build.sh (build/libsymddp_cuda.so) when stale
#    2 MPS 8, 3, 2 PEs  TestGPUDesync (every commtest.DesyncCases case in a
#                       job of its own) and TestGPUDesyncInGraph (a replayed
#                       CUDA graph) at 8 PEs, TestGPUDesyncEndsJob (the
#                       launcher's line) at 3, TestGPUDesyncNVSHMEM (peers
#                       forced out of pointer reach: the comparison on the
#                       host) at 2
#    3 cost             BenchmarkGPUDesyncCheck at 2 and 8 PEs under MPS:
#                       barrier and 4 KiB allreduce as kernels back to back
#                       (what a step's graph sees), check on and off
#    4 GPT-2            train --model gpt2 --pes 8 --mps on, synthetic
#                       tokens, 100 steps, SYMDDP_DESYNC_CHECK off then on:
#                       tokens/s of steps 26-100
#    5 MPS 8 PEs        TestGPUConformance with the check on (no false
#                       desync in any collective)
#    6 no MPS, 2 PEs    TestGPUDesync and TestGPUDesyncInGraph in NVSHMEM's
#                       limited-MPG mode
#
# Usage: scripts/gpu-desync-check.sh [--budget SECONDS] [--stages LIST]
# (default 540 s; LIST: some of tests,cost,gpt2, default all three: e.g.
# --stages gpt2 in a second call when the first ran out of budget). Results
# in $OUT (default .device/out): desync-summary.txt (printed at the end),
# desync-tests.log, desync-bench.log, desync-train.log, desync-build.log.
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
budget="${GPU_CHECK_BUDGET:-540}"
stages="tests,cost,gpt2"
while [ "$#" -gt 0 ]; do
    case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --budget=*) budget="${1#*=}"; shift ;;
    --stages) stages="$2"; shift 2 ;;
    --stages=*) stages="${1#*=}"; shift ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu-desync-check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

outdir="${OUT:-$root/.device/out}"
mkdir -p "$outdir"
build_log="$outdir/desync-build.log"
test_log="$outdir/desync-tests.log"
bench_log="$outdir/desync-bench.log"
train_log="$outdir/desync-train.log"
mps_log="$outdir/desync-mps.log"
summary="$outdir/desync-summary.txt"
: >"$build_log"; : >"$test_log"; : >"$bench_log"; : >"$train_log"; : >"$mps_log"; : >"$summary"
start=$(date +%s)
want() { case ",$stages," in *",$1,"*) return 0 ;; esac; return 1; }

# shellcheck source=scripts/gpu-lib.sh
. "$root/scripts/gpu-lib.sh"
gpu_env
note "GPU check of desync detection (issue 37), $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s"
note "GPU: $(timeout 10 nvidia-smi -L 2>/dev/null | head -1)"
bin="$root/.device/bin"
gpu_binaries "$bin" nvshmem.test train

# ---- 1 build ----
gpu_build "$build_log" 0

# nvtest NAME LIMIT LOG [NAME=VALUE...] -- TESTFLAGS...: the nvshmem test
# binary in its package directory, verbose, its timeout inside the stage's.
nvtest() {
    local name="$1" limit="$2" log="$3"
    shift 3
    local vars=()
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    stage "$name" "$limit" "$log" env -C "$root/comm/nvshmem" "${vars[@]}" "$bin/nvshmem.test" \
        -test.v=true -test.count=1 -test.timeout="$((limit - 5))s" "$@"
}

# ---- 2, 3 under this script's MPS daemon ----
trap gpu_mps_stop EXIT
if want tests || want cost; then
    gpu_mps_start "$mps_log"
fi
if [ "$mps_up" = 1 ] && want tests; then
    # shellcheck disable=SC2046 # the variables are words without blanks
    nvtest "MPS 8 PEs: desync cases, graph" 120 "$test_log" $(mpsvars 8) -- \
        -test.run '^(TestGPUDesync|TestGPUDesyncInGraph)$'
    # shellcheck disable=SC2046
    nvtest "MPS 3 PEs: job ends on a desync" 60 "$test_log" $(mpsvars 3) -- -test.run '^TestGPUDesyncEndsJob$'
    # shellcheck disable=SC2046
    nvtest "MPS 2 PEs: desync, NVSHMEM paths" 90 "$test_log" $(mpsvars 2) -- -test.run '^TestGPUDesyncNVSHMEM$'
fi
if [ "$mps_up" = 1 ] && want cost; then
    for n in 2 8; do
        # shellcheck disable=SC2046
        nvtest "MPS $n PEs: cost of the check" 90 "$bench_log" $(mpsvars $n) -- \
            -test.run '^$' -test.bench 'BenchmarkGPUDesyncCheck/NPEs/check/Kernel' -test.benchtime 2000x
    done
fi
gpu_mps_stop

# ---- 4 GPT-2 at 8 PEs under the launcher's MPS daemon, check off then on ----
if want gpt2; then
    for check in off on; do
        # SYMDDP_CUDA_TUNE=0: cuBLASLt's heuristic GEMMs, a shorter start and
        # the same kernels in both runs
        stage "GPT-2 8 PEs, check $check" 150 "$train_log" env SYMDDP_DESYNC_CHECK=$check SYMDDP_CUDA_TUNE=0 \
            "$bin/train" --backend nvshmem --pes 8 --mps on --gpu-lib "$root/build/libsymddp_cuda.so" \
            --no-progress --model gpt2 --dataset synthetic --batch-size 8 --max-steps 100 --log-every 25 \
            --eval-every 0 --sample-tokens 0 --seed 1
    done
fi

# ---- 5 the conformance suite at 8 PEs under MPS with the check on ----
if want tests; then
    gpu_mps_start "$mps_log"
    if [ "$mps_up" = 1 ]; then
        # shellcheck disable=SC2046
        nvtest "MPS 8 PEs: conformance, check on" 90 "$test_log" $(mpsvars 8) -- -test.run '^TestGPUConformance$'
        gpu_mps_stop
    fi
fi

# ---- 6 no MPS ----
if want tests; then
    nvtest "no MPS 2 PEs: desync cases, graph" 120 "$test_log" SYMDDP_GPU_PES=2 -- \
        -test.run '^(TestGPUDesync|TestGPUDesyncInGraph)$'
fi

# ---- summary ----
{
    echo
    echo "---- tests: failures (first 60 lines) ----"
    grep -E -A6 '^\s*--- FAIL|^panic:|TIMED OUT|test timed out' "$test_log" | head -60
    echo "---- tests: skips ----"
    grep -E -B1 -- '--- SKIP' "$test_log" | grep -E '_test\.go:[0-9]+: ' |
        sed -E 's/^[[:space:]]+[a-z_]+_test\.go:[0-9]+: //' | sort | uniq -c | head -10
    echo "---- cost: ns/op of PE 0 (check on against off) ----"
    grep -E '^BenchmarkGPUDesyncCheck/' "$bench_log"
    echo "---- GPT-2 8 PEs: tokens/s (steps 50, 75, 100; check off, then on) ----"
    grep -E '^=====|step (50|75|100)/100 |tokens/s on ' "$train_log" | sed -E 's/^===== ([^(]*) \(.*/== \1/'
} >>"$summary" 2>&1
echo
echo "==================== desync summary ($(elapsed)s) ===================="
cat "$summary"
