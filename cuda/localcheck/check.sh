#!/usr/bin/env bash
# Compile-checks every cuda/*.cu for sm_90 against declarations-only NVSHMEM
# headers (cuda/localcheck/include), and cuda/gptcheck/*.cu, on a machine
# with nvcc but without NVSHMEM or a GPU. Objects go to a temporary
# directory and are thrown away. The real build is cuda/build.sh on a GPU
# host.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(dirname "$here")"
NVCC="${NVCC:-$(command -v nvcc || true)}"
if [ -z "$NVCC" ]; then
    echo "check.sh: nvcc not found (set NVCC)" >&2
    exit 2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
for f in "$src"/*.cu; do
    name="$(basename "$f" .cu)"
    if "$NVCC" -O2 -std=c++17 -arch=sm_90 -rdc=true -Xcompiler -fPIC,-Wall,-Wextra \
        -Werror all-warnings -I"$here/include" -I"$src" -c "$f" -o "$tmp/$name.o"; then
        echo "ok   $name.cu"
    else
        echo "FAIL $name.cu"
        status=1
    fi
done
# The GPT kernel check and step harness (cuda/gptcheck, linked against the
# library on the GPU host by scripts/gpu-gpt-kernels-check.sh) must compile
# against the compute ABI's header alone.
for f in "$src"/gptcheck/*.cu; do
    name="gptcheck/$(basename "$f" .cu)"
    if "$NVCC" -O2 -std=c++17 -arch=sm_90 -Xcompiler -Wall,-Wextra -Werror all-warnings -I"$src" \
        -c "$f" -o "$tmp/$(basename "$f" .cu).gptcheck.o"; then
        echo "ok   $name.cu"
    else
        echo "FAIL $name.cu"
        status=1
    fi
done
# The C ABI headers must also be plain C (cgo includes them), and so must
# sd_desync.h (the Go tests' fake library includes it).
for h in symddp_cuda.h symddp_compute.h sd_desync.h; do
    if gcc -std=c11 -Wall -Wextra -Werror -fsyntax-only -x c "$src/$h"; then
        echo "ok   $h (C11)"
    else
        echo "FAIL $h (C11)"
        status=1
    fi
done
# The kernel profiler's injection library (scripts/gpu-kernprof.sh), against
# the declarations-only cupti.h beside the NVSHMEM ones.
if g++ -O2 -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$here/include" "$src/kernprof/kernprof.cpp"; then
    echo "ok   kernprof/kernprof.cpp"
else
    echo "FAIL kernprof/kernprof.cpp"
    status=1
fi
# CPU simulations of kernels (sim.h says how; each file says what it
# checks): sim NAME FILE.cu FIRST LAST copies FILE.cu's lines from the one
# matching FIRST to the one matching LAST into NAME_kernels.inc, builds
# NAME_sim.cpp around it and runs it.
sim() {
    local name="$1" file="$2" first="$3" last="$4"
    sed -n "/$first/,/$last/p" "$src/$file" >"$tmp/${name}_kernels.inc"
    if g++ -O1 -std=c++20 -pthread -Wall -Wextra -Wno-unknown-pragmas -Werror -ffp-contract=off -I"$tmp" \
        "$here/${name}_sim.cpp" -o "$tmp/${name}_sim" && "$tmp/${name}_sim" >"$tmp/${name}_sim.log" 2>&1; then
        echo "ok   $file kernels simulated on the CPU ($name)"
    else
        cat "$tmp/${name}_sim.log" 2>/dev/null
        echo "FAIL $file kernels simulated on the CPU ($name)"
        status=1
    fi
}
# the fp32 flash attention against float64 attention
sim attention_f32 sd_compute_attention_f32.cu '^\/\* ---- the kernels' '^\/\* ---- the launchers'
# the fp32 layer norm's backward against hostloops' bits
sim layernorm_f32 sd_compute_layernorm.cu '^\/\* ---- the fp32 kernels' '^\/\* ---- bf16'
# the fp32 softmax cross-entropy against hostloops' row
sim xent_f32 sd_compute_loss.cu '^\/\* ---- the fp32 kernel (' '^\/\* ---- the fp32 kernel.s step node'
exit $status
