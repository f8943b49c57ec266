#!/usr/bin/env bash
# Builds build/libsymddp_cuda.so, the project's C-ABI GPU library, from every
# cuda/*.cu. Run it on a GPU host (it needs nvcc, NVSHMEM and cuBLAS, not a GPU):
#
#   cuda/build.sh            # from the repository root or anywhere
#
# Finds nvcc ($NVCC, $CUDA_HOME/bin, PATH, /usr/local/cuda/bin) and NVSHMEM
# ($NVSHMEM_HOME, else the pip wheel nvidia-nvshmem-cu* through python3).
# Targets sm_90 unless SD_ARCH says otherwise (SD_ARCH=sm_80 ...).
# Device code is compiled relocatable (-rdc) and device-linked against
# libnvshmem_device.a, because NVSHMEM's inline init needs its device library.
# Output: build/libsymddp_cuda.so (and build/obj/*.o), relative to the repository root.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/cuda"
out="$root/build"
obj="$out/obj"
arch="${SD_ARCH:-sm_90}"

die() { echo "cuda/build.sh: $*" >&2; exit 1; }

# ---- nvcc ----
NVCC="${NVCC:-}"
if [ -z "$NVCC" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC="$CUDA_HOME/bin/nvcc"; fi
if [ -z "$NVCC" ]; then NVCC="$(command -v nvcc || true)"; fi
if [ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc; fi
[ -n "$NVCC" ] || die "nvcc not found: set NVCC or CUDA_HOME, or put nvcc on PATH"
cuda_root="$(cd "$(dirname "$NVCC")/.." && pwd)"
cuda_lib="$cuda_root/lib64"
[ -d "$cuda_lib" ] || cuda_lib="$cuda_root/lib"

# ---- NVSHMEM ----
NV="${NVSHMEM_HOME:-}"
for py in /opt/torch/.venv/bin/python3 python3; do # the order of scripts/gpu-lib.sh
    [ -n "$NV" ] && break
    command -v "$py" >/dev/null || continue
    NV="$("$py" -c "import importlib.util as u; print(list(u.find_spec('nvidia.nvshmem').submodule_search_locations)[0])" 2>/dev/null || true)"
done
[ -n "$NV" ] && [ -f "$NV/include/nvshmem.h" ] ||
    die "NVSHMEM not found: set NVSHMEM_HOME to a directory with include/nvshmem.h (or install the nvidia-nvshmem-cu13 wheel for python3)"
[ -f "$NV/lib/libnvshmem_device.a" ] || die "$NV/lib/libnvshmem_device.a missing"
if [ -e "$NV/lib/libnvshmem_host.so" ]; then
    host_lib="-lnvshmem_host"
else
    host_so="$(cd "$NV/lib" && ls libnvshmem_host.so.* 2>/dev/null | sort | head -n1 || true)"
    [ -n "$host_so" ] || die "no libnvshmem_host.so* in $NV/lib"
    host_lib="-l:$host_so"
fi

# ---- cuDNN (optional) ----
. "$src/cudnn.sh"

echo "nvcc:    $NVCC ($("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
echo "nvshmem: $NV"
echo "arch:    $arch"
echo "cudnn:   ${cudnn_root:-not found (the fused attention is ours alone; set CUDNN_HOME)}"

mkdir -p "$obj"
rm -f "$obj"/*.o "$out/dlink.o" "$out/libsymddp_cuda.so"

# ---- compile every .cu in parallel ----
flags=(-O3 -std=c++17 -arch="$arch" -rdc=true -Xcompiler -fPIC -lineinfo -I"$NV/include" -I"$src" "${cudnn_cflags[@]}")
pids=()
names=()
for f in "$src"/*.cu; do
    name="$(basename "$f" .cu)"
    "$NVCC" "${flags[@]}" -c "$f" -o "$obj/$name.o" &
    pids+=($!)
    names+=("$name")
done
failed=0
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "cuda/build.sh: compiling ${names[$i]}.cu failed" >&2
        failed=1
    fi
done
[ "$failed" = 0 ] || exit 1

# ---- device link, then the shared library ----
"$NVCC" -arch="$arch" -dlink -Xcompiler -fPIC "$obj"/*.o -L"$NV/lib" -lnvshmem_device -o "$out/dlink.o"
"$NVCC" -shared -arch="$arch" "$obj"/*.o "$out/dlink.o" \
    -L"$NV/lib" "$host_lib" -lnvshmem_device -L"$cuda_lib" -lcublasLt -lcublas -lcudart "${cudnn_ldflags[@]}" \
    -Xlinker -rpath="$NV/lib" -Xlinker -rpath="$cuda_lib" \
    -o "$out/libsymddp_cuda.so"

# ---- the library must load with every symbol bound, and export the ABI ----
exported="$(nm -D --defined-only "$out/libsymddp_cuda.so" | awk '$2 == "T" && $3 ~ /^sd_/ {print $3}' | wc -l)"
if command -v python3 >/dev/null; then
    LD_LIBRARY_PATH="$NV/lib:$cuda_lib:${LD_LIBRARY_PATH:-}" python3 - "$out/libsymddp_cuda.so" <<'PY' || die "the library does not load (undefined symbols?)"
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)
print("loaded:  ABI version", lib.sd_abi_version())
PY
fi
echo "built:   $out/libsymddp_cuda.so ($exported sd_* entry points)"
