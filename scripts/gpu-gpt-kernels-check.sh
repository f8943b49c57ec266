#!/usr/bin/env bash
# The GPU check of the GPT-2 kernels (issue 20), run on the GPU host from the
# repository root:
#
#   scripts/gpu-gpt-kernels-check.sh [--torch] [--no-time] [--no-step]
#
# 1. builds build/libsymddp_cuda.so (cuda/build.sh: every cuda/*.cu, so the
#    bf16 kernels of sd_compute_*.cu as the engine loads them, through the
#    one compute ABI, symddp_compute.h), then cuda/gptcheck/check*.cu (one
#    file an operation) and cuda/gptcheck/step.cu against it by nvcc (-O3 -arch=sm_90 -std=c++17,
#    cuBLASLt; -DSD_WITH_CUDNN where cuda/cudnn.sh finds cuDNN, as the
#    library's build does) into build/gptcheck and build/gptstep;
# 2. runs gptcheck: every kernel against its CPU reference at gpt-tiny and
#    GPT-2 124M sizes (every attention version: wmma, mma and, where cuDNN was found, cuDNN's three backward forms), then timings at
#    GPT-2 124M shapes -> $OUT/gpt-kernels.txt;
# 3. runs gptstep: the whole GPT-2 124M training step in one CUDA graph at
#    B=16 and B=32, the loss over 20 steps, ms/step, tokens/s, MFU, memory,
#    the step's time per operation (--breakdown, from an eager step),
#    then at B=16 with one choice changed at a time (the bias gradients in
#    the dW epilogue, untuned GEMMs, the wmma attention) -> $OUT/gpt-step.txt;
# 4. with --torch only: bench/torch_gpt_bench.py --quick for GPT-2 124M at
#    batch 16, eager and torch.compile -> $OUT/torch-gpt.txt (--no-torch, the
#    default, is still accepted).
# Output goes to $OUT when set, else .device/out. Exits non-zero when a build
# fails, any check says FAIL or the step's loss does not fall. Needs NVSHMEM
# for the library's build (cuda/build.sh finds it), not for the runs. About 4
# minutes without torch.
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
torch=0
timing=1
dostep=1
while [ "$#" -gt 0 ]; do
    case "$1" in
    --torch) torch=1; shift ;;
    --no-torch) torch=0; shift ;;
    --no-time) timing=0; shift ;;
    --no-step) dostep=0; shift ;;
    -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gpu-gpt-kernels-check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
export NVSHMEM_DISABLE_NVLS=1
outdir="${OUT:-$root/.device/out}"
mkdir -p "$outdir" "$root/build"
log="$outdir/gpt-kernels.txt"
tlog="$outdir/torch-gpt.txt"
slog="$outdir/gpt-step.txt"
: >"$log"
start=$(date +%s)

NVCC="${NVCC:-}"
[ -z "$NVCC" ] && NVCC="$(command -v nvcc || true)"
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -z "$NVCC" ]; then echo "nvcc not found" | tee -a "$log"; exit 1; fi
cuda_root="$(cd "$(dirname "$NVCC")/.." && pwd)"
export LD_LIBRARY_PATH="$cuda_root/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
arch="${SD_ARCH:-sm_90}"
status=0

{
    echo "== GPT kernels check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    timeout 20 nvidia-smi -L 2>&1 | head -2
    echo "nvcc: $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
} >>"$log" 2>&1

# ---- 1 build ----
echo "== build build/libsymddp_cuda.so (cuda/build.sh)" >>"$log"
if ! timeout 400 "$root/cuda/build.sh" >>"$log" 2>&1; then
    echo "BUILD FAIL: cuda/build.sh" | tee -a "$log"
    cat "$log"
    exit 1
fi
echo "== build gptcheck, gptstep" >>"$log"
# check and step in parallel, both against the library (its shared cudart, so
# that the streams and memory are one runtime's); the checks know whether the
# library has cuDNN's attention (SD_WITH_CUDNN: its default form must build)
. "$root/cuda/cudnn.sh"
withcudnn=()
[ -n "$cudnn_root" ] && withcudnn=(-DSD_WITH_CUDNN)
link=(-cudart shared -L"$root/build" -lsymddp_cuda -Xlinker -rpath="$root/build" -L"$cuda_root/lib64" -lcublasLt -lcublas)
timeout 300 "$NVCC" -O3 -std=c++17 -arch="$arch" -lineinfo -I"$root/cuda" \
    "$root/cuda/gptcheck/step.cu" "${link[@]}" -o "$root/build/gptstep" >"$root/build/gptstep.log" 2>&1 &
steppid=$!
if ! timeout 300 "$NVCC" -O3 -std=c++17 -arch="$arch" -lineinfo -I"$root/cuda" "${withcudnn[@]}" \
    "$root"/cuda/gptcheck/check*.cu "${link[@]}" -o "$root/build/gptcheck" >>"$log" 2>&1; then
    echo "BUILD FAIL: check*.cu" | tee -a "$log"
    wait "$steppid"
    cat "$log"
    exit 1
fi
stepbuilt=1
if ! wait "$steppid"; then
    stepbuilt=0
    cat "$root/build/gptstep.log" >>"$log"
    echo "BUILD FAIL: step.cu" | tee -a "$log"
    status=1
fi
echo "build: $(($(date +%s) - start)) s" >>"$log"

# ---- 2 run ----
args=()
[ "$timing" = 0 ] && args+=(--no-time)
echo "== run build/gptcheck ${args[*]:-}" >>"$log"
timeout 300 "$root/build/gptcheck" "${args[@]}" >>"$log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && status=1
grep -q ' FAIL' "$log" && status=1
echo "gptcheck exit $rc, $(($(date +%s) - start)) s" >>"$log"

# ---- 3 the whole training step ----
if [ "$dostep" = 1 ] && [ "$stepbuilt" = 1 ]; then
    timeout 240 "$root/build/gptstep" --breakdown >"$slog" 2>&1
    src=$?
    [ "$src" -ne 0 ] && status=1
    echo "gptstep exit $src, $(($(date +%s) - start)) s" >>"$slog"
    # the same step with one choice changed, for comparison: the heuristic's
    # GEMM algorithms (gptstep also takes --bgrad-epilogue and --attention
    # wmma: 32.49 and 45.05 ms against 32.00 ms at B=16 on 2026-12-02)
    for alt in "--no-tune"; do
        # shellcheck disable=SC2086 # an $alt may be two words (--attention wmma)
        timeout 90 "$root/build/gptstep" --batch 16 $alt >>"$slog" 2>&1
        src=$?
        [ "$src" -ne 0 ] && status=1
        echo "gptstep ($alt) exit $src, $(($(date +%s) - start)) s" >>"$slog"
    done
fi

# ---- 4 PyTorch baseline (--torch) ----
if [ "$torch" = 1 ]; then
    PY=""
    for py in /opt/torch/.venv/bin/python3 python3; do command -v "$py" >/dev/null && { PY="$py"; break; }; done
    if [ -n "$PY" ]; then
        left=$((360 - ($(date +%s) - start)))
        [ "$left" -lt 60 ] && left=60
        timeout "$left" "$PY" bench/torch_gpt_bench.py --preset gpt2 --batch 16 --modes eager,compile --quick >"$tlog" 2>&1 ||
            echo "torch bench exit $? (see $tlog)" >>"$log"
    else
        echo "no python3 with torch: PyTorch baseline skipped" >"$tlog"
    fi
fi

echo
echo "==================== GPT kernels ($(($(date +%s) - start)) s) ===================="
grep -E '^(check|repeat|time|info|plan|device|----|====|BUILD|WARN|gptcheck)|error|FAIL' "$log"
if [ "$dostep" = 1 ] && [ -f "$slog" ]; then
    echo "---- training step (build/gptstep) ----"
    grep -E '^(device|----|step|loss|graph|RESULT|memory|info|====|gptstep|breakdown|  [a-zA-Z])|error|FAIL' "$slog"
fi
[ "$torch" = 1 ] && { echo "---- PyTorch ----"; grep -E '^(RESULT|ERROR|torch )' "$tlog"; }
exit $status
