#!/usr/bin/env bash
# Prepares, on the CPU machine, what scripts/gpu-check.sh runs on the GPU host
# (which has no Go toolchain): the Go test and bench binaries, built with cgo
# into .device/bin/ (git-ignored). Then checks what can be checked here.
#
#   scripts/gpu-prepare.sh      # from anywhere; then carry .device/bin to the GPU host
#
# Binaries:
#   .device/bin/nvshmem.test   go test -c ./comm/nvshmem        (conformance, kernels, failures)
#   .device/bin/cudalib.test   go test -c ./internal/cudalib    (loader, fake library)
#   .device/bin/symbench       go build ./cmd/symbench          (gpu-allreduce benchmark)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=.device/bin
rm -rf "$out"
mkdir -p "$out"

export CGO_ENABLED=1
go test -c -o "$out/nvshmem.test" ./comm/nvshmem
go test -c -o "$out/cudalib.test" ./internal/cudalib
go build -o "$out/symbench" ./cmd/symbench
echo "built:"
ls -l "$out"

# What can be checked without a GPU.
if command -v nvcc >/dev/null; then
    cuda/localcheck/check.sh
else
    echo "nvcc not found: skipped the compile check of cuda/*.cu"
fi
go vet ./internal/cudalib/... ./comm/nvshmem/ ./cmd/symbench/
CGO_ENABLED=0 go build ./...
CGO_ENABLED=0 go vet ./internal/cudalib/... ./comm/nvshmem/
go test ./internal/cudalib/... ./comm/nvshmem/
echo "ready: run scripts/gpu-check.sh on the GPU host with .device/bin carried along"
