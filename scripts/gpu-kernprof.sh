#!/usr/bin/env bash
# A kernel-time profile of any command on a GPU host without Nsight Systems
# (the H100 hosts have none): builds cuda/kernprof/kernprof.cpp against the
# host's CUPTI into build/libsdkernprof.so (once; again when the source is
# newer), runs the command with CUDA_INJECTION64_PATH pointing at it, and
# prints the first lines of each CUDA process's table (total microseconds,
# launches, mean, kernel name; sorted by total).
#
#   scripts/gpu-kernprof.sh [--skip SECONDS] [--top N] [--out PREFIX] [--groups] -- CMD [ARGS...]
#
# --skip   seconds after a process's first kernel that are not counted
#          (default 5: plan builds, the GEMM tuner, the first steps)
# --top    lines of each table printed (default 30)
# --out    table prefix; each process writes PREFIX.PID.txt (default
#          $OUT/kernprof, else .device/out/kernprof)
# --groups also each table summed by operation per training step
#          (scripts/kernprof-groups.awk: GEMMs, attention, norms, SwiGLU,
#          rotation, classifier, optimizer, ...; steps counted by the
#          update kernel's launches)
#
# To read a table per step by hand, divide by a kernel that runs once a
# step (the optimizer's). SDPROF_TAIL=N in the environment adds each stream's last N
# kernels to every table (cuda/kernprof/kernprof.cpp): where a hung process's
# streams stopped, by the GPU's clock, every PE's file naming its PE. The
# command's exit status is the script's. Every command keeps
# NVSHMEM_DISABLE_NVLS=1.
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
skip=5
top=30
groups=0
prefix="${OUT:-$root/.device/out}/kernprof"
while [ "$#" -gt 0 ]; do
    case "$1" in
    --skip) skip="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    --out) prefix="$2"; shift 2 ;;
    --groups) groups=1; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gpu-kernprof.sh: unknown argument $1 (the command goes after --)" >&2; exit 2 ;;
    esac
done
if [ "$#" -eq 0 ]; then
    echo "gpu-kernprof.sh: no command to profile (give it after --)" >&2
    exit 2
fi
export NVSHMEM_DISABLE_NVLS=1

cuda_root=/usr/local/cuda
command -v nvcc >/dev/null && cuda_root="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)"
# CUPTI: the toolkit's, else the PyTorch environment's wheel.
inc="" lib=""
for d in "$cuda_root/extras/CUPTI" "$cuda_root" /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13 \
    /opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_cupti; do
    if [ -f "$d/include/cupti.h" ]; then
        for l in "$d/lib64" "$d/lib" "$cuda_root/lib64"; do
            if ls "$l"/libcupti.so* >/dev/null 2>&1; then inc="$d/include" lib="$l"; break 2; fi
        done
    fi
done
if [ -z "$inc" ]; then
    echo "gpu-kernprof.sh: no CUPTI (cupti.h and libcupti.so) under $cuda_root or the PyTorch environment" >&2
    exit 2
fi
so="$root/build/libsdkernprof.so"
src="$root/cuda/kernprof/kernprof.cpp"
if [ ! -f "$so" ] || [ "$src" -nt "$so" ]; then
    # The header's newest kernel record (CUpti_ActivityKernelN): the fields read are in all of them.
    rec="$(grep -ho 'CUpti_ActivityKernel[0-9]*;' "$inc"/cupti_activity*.h 2>/dev/null | tr -d ';' | sort -V | tail -1)"
    cupti_so="$(ls "$lib"/libcupti.so* | sort | head -1)"
    mkdir -p "$root/build"
    if ! g++ -O2 -std=c++17 -shared -fPIC -I"$inc" -I"$cuda_root/include" ${rec:+-DSD_KERNEL_RECORD=$rec} \
        -o "$so" "$src" "$cupti_so" -Wl,-rpath,"$lib" -lpthread; then
        echo "gpu-kernprof.sh: building $so failed (CUPTI from $inc, $lib)" >&2
        exit 2
    fi
    echo "kernprof: built $so (CUPTI $inc, record ${rec:-CUpti_ActivityKernel4})"
fi
mkdir -p "$(dirname "$prefix")"
rm -f "$prefix".*.txt
CUDA_INJECTION64_PATH="$so" SDPROF_OUT="$prefix" SDPROF_SKIP_S="$skip" "$@"
rc=$?
sleep 1
found=0
for t in "$prefix".*.txt; do
    [ -f "$t" ] || continue
    found=1
    echo "---- $t (first $top lines) ----"
    head -n "$((top + 2))" "$t" | cut -c1-220
    [ "$groups" = 1 ] && awk -f "$root/scripts/kernprof-groups.awk" "$t"
done
[ "$found" = 1 ] || echo "gpu-kernprof.sh: no table written (did the command start CUDA?)"
exit "$rc"
