#!/usr/bin/env bash
# Prepares, on the CPU machine, what scripts/gpu-compute-check.sh and
# scripts/gpu-gpt-check.sh run on the GPU host (which has no Go toolchain)
# for the compute side of issue 7 and the GPT of issue 20: the Go
# test, train and bench binaries, built with cgo, xz-compressed into
# .device/bin/ (git-ignored; the check script unpacks them), and the
# Fashion-MNIST files into .device/data/fashion-mnist. Then checks what can be
# checked here.
#
#   scripts/gpu-compute-prepare.sh            # then carry .device/bin and .device/data
#   scripts/gpu-compute-prepare.sh --raw      # binaries uncompressed (about 4x larger)
#
# Binaries (stripped and xz-compressed: about 16 MB for the four):
#   .device/bin/cuda.test.xz       go test -c ./compute/cuda   (conformance, optimizer bits, CPU-vs-GPU steps, the fused GPT)
#   .device/bin/ddp.test.xz        go test -c ./ddp            (the GPU step path against the CPU path)
#   .device/bin/train.xz           go build ./cmd/train        (Fashion-MNIST and gpt-tiny runs, --backend nvshmem)
#   .device/bin/symbench.xz        go build ./cmd/symbench     (gpu-train, gpu-gpt; also the comm backend's gpu-allreduce)
#   .device/bin/tokenize.xz        go build ./cmd/tokenize     (GPT-2 BPE shards for gpu-lm-check.sh)
#   .device/bin/ownlm.xz, ownlm.test.xz  go build / test -c ./examples/ownlm  (gpu-gpt-check.sh --layers)
# gpu-gpt-check.sh needs no data beyond the repository: gpt-tiny trains on its
# text files, GPT-2 on train's synthetic tokens.
# Only these files are replaced: the comm backend's binaries in .device/bin
# stay. Compression matters: what is carried to the GPU host is limited to
# 64 MiB, and the data alone is 30 MB. gpu-compute-check.sh unpacks every
# .device/bin/*.xz in place, so scripts/gpu-check.sh finds a raw symbench
# when it runs after it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
raw=0
[ "${1:-}" = "--raw" ] && raw=1
out=.device/bin
mkdir -p "$out"

export CGO_ENABLED=1
ld=(-ldflags=-s\ -w)
build() { # name, compress (0/1), go subcommand..., package
    local name="$1" pack="$2" pkg="${*: -1}"
    shift 2
    rm -f "$out/$name" "$out/$name.xz"
    go "${@:1:$#-1}" "${ld[@]}" -o "$out/$name" "$pkg"
    if [ "$raw" = 0 ] && [ "$pack" = 1 ]; then
        xz -6 -T0 "$out/$name"
    fi
}
build cuda.test 1 test -c ./compute/cuda
build ddp.test 1 test -c ./ddp
build train 1 build ./cmd/train
build symbench 1 build ./cmd/symbench
build tokenize 1 build ./cmd/tokenize
build ownlm 1 build ./examples/ownlm
build ownlm.test 1 test -c ./examples/ownlm
echo "built:"
ls -l "$out"

# Fashion-MNIST for the training runs (the GPU host has no copy).
data=.device/data/fashion-mnist
if [ -d /usr/share/datasets/fashion-mnist ]; then
    mkdir -p "$data"
    cp -u /usr/share/datasets/fashion-mnist/*-ubyte.gz "$data"/
    echo "data:"
    ls -l "$data"
else
    echo "no /usr/share/datasets/fashion-mnist: install dataset-fashion-mnist, or carry the four .gz files in $data yourself"
fi

# What can be checked without a GPU: the .cu files compile for sm_90
# (declarations-only NVSHMEM headers), the C header is C, the Go side builds
# and vets with and without cgo, and the tests pass (the GPU ones skip; the
# emulated-device ones run the engine, the GPU step path and the bench).
if command -v nvcc >/dev/null; then
    cuda/localcheck/check.sh
else
    echo "nvcc not found: skipped the compile check of cuda/*.cu"
fi
pkgs=(./compute/... ./internal/cudalib/... ./ddp/... ./traincmd/ ./cmd/symbench/)
go vet "${pkgs[@]}"
CGO_ENABLED=0 go build ./...
CGO_ENABLED=0 go vet ./compute/... ./internal/cudalib/... ./ddp/...
go test ./compute/... ./ddp/... ./models/... ./internal/cudalib/...
python3 -m py_compile bench/torch_mlp_bench.py bench/torch_gpt_bench.py bench/torch_llama_bench.py
bash -n scripts/gpu-compute-check.sh
bash -n scripts/gpu-gpt-check.sh
bash -n scripts/gpu-overlap-check.sh
bash -n scripts/gpu-lm-check.sh
bash -n scripts/gpu-kernprof.sh
# gpu-kernprof.sh --groups' sums, on a table of 2026-12-07 (llama-124m B16, an H100)
awk -f scripts/kernprof-groups.awk cuda/kernprof/testdata/llama-124m-b16-h100.txt | grep -q 'all kernels  *30876.1$'
echo "ready: run scripts/gpu-compute-check.sh (with .device/data), scripts/gpu-gpt-check.sh or scripts/gpu-lm-check.sh on the GPU host with .device/bin carried along"
