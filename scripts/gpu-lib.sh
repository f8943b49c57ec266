# shellcheck shell=bash
# What scripts/gpu-check.sh, gpu-compute-check.sh and gpu-multi-check.sh
# share, sourced by each: the GPU host's environment, the unpacking of the
# carried binaries and the time-limited stages.
#
# gpu_env: exports NVSHMEM_DISABLE_NVLS=1 (NVLink multicast stays off on
# these hosts), NVSHMEM_REMOTE_TRANSPORT (none unless set), SYMDDP_CUDA_LIB
# ($root/build/libsymddp_cuda.so), NVSHMEM_HOME (from the pip wheel
# nvidia-nvshmem-cu* when unset) and LD_LIBRARY_PATH (NVSHMEM's plugins,
# CUDA's lib64); sets PY to a python3, PyTorch's venv first.
#
# gpu_unpack: see below.
#
# note, elapsed, stage: need $summary (the summary file), $outdir (for
# scratch), $start (date +%s at the start) and $budget (seconds).
gpu_env() {
    export NVSHMEM_DISABLE_NVLS=1
    export NVSHMEM_REMOTE_TRANSPORT="${NVSHMEM_REMOTE_TRANSPORT:-none}"
    export SYMDDP_CUDA_LIB="$root/build/libsymddp_cuda.so"
    local nv="${NVSHMEM_HOME:-}" py
    PY=""
    for py in /opt/torch/.venv/bin/python3 python3; do
        command -v "$py" >/dev/null || continue
        [ -z "$PY" ] && PY="$py"
        [ -n "$nv" ] && break
        nv="$("$py" -c "import importlib.util as u; print(list(u.find_spec('nvidia.nvshmem').submodule_search_locations)[0])" 2>/dev/null || true)"
    done
    export NVSHMEM_HOME="${nv:-}"
    local cuda_root="/usr/local/cuda"
    command -v nvcc >/dev/null && cuda_root="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)"
    export LD_LIBRARY_PATH="${nv:+$nv/lib:}$cuda_root/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# gpu_env_report LOG [LINE...]: appends the GPU host's facts to LOG:
# nvidia-smi, nvcc, NVSHMEM, PyTorch, the LINEs given, the carried binaries
# and the environment (after gpu_env).
gpu_env_report() {
    local log="$1" line
    shift
    {
        echo "== nvidia-smi"; timeout 20 nvidia-smi || true
        echo "== nvcc"; timeout 10 nvcc --version || true
        echo "== NVSHMEM: ${NVSHMEM_HOME:-not found}"
        echo "== python: ${PY:-none}"; [ -n "$PY" ] && timeout 60 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
        for line in "$@"; do echo "$line"; done
        echo "== binaries"; ls -l "$root/.device/bin" 2>&1
        echo "== environment"; env | grep -E '^(NVSHMEM|SYMDDP|CUDA|LD_LIBRARY)' | sort
    } >>"$log" 2>&1
}

# gpu_binaries DIR NAME...: gpu_unpack DIR, then a note for every NAME
# missing there (built by scripts/gpu-compute-prepare.sh on the CPU
# machine).
gpu_binaries() {
    local dir="$1" b
    shift
    gpu_unpack "$dir"
    for b in "$@"; do
        [ -x "$dir/$b" ] || note "missing .device/bin/$b(.xz): run scripts/gpu-compute-prepare.sh on the CPU machine and carry .device/bin"
    done
}

# gpu_unpack DIR: unpacks every DIR/*.xz beside itself (kept), where the
# unpacked file is missing or older (the prepare scripts compress what they
# carry: the device tool moves at most 64 MiB).
gpu_unpack() {
    local x b
    for x in "$1"/*.xz; do
        [ -f "$x" ] || continue
        b="${x%.xz}"
        if [ ! -x "$b" ] || [ "$x" -nt "$b" ]; then
            xz -dkf "$x" && chmod +x "$b"
        fi
    done
}

note() { echo "$*" | tee -a "$summary"; }
elapsed() { echo $(($(date +%s) - start)); }

# stage NAME MAXSECONDS LOG CMD...: runs CMD with a time limit (at most what
# is left of the budget, less 10 s for its cleanup), appends its output to
# LOG and a line to the summary (with the counts of top-level test results
# when it ran tests). A stage with less than 25 s left is skipped (exit 125).
stage() {
    local name="$1" max="$2" log="$3"
    shift 3
    local left=$((budget - $(elapsed)))
    if [ "$left" -lt 25 ]; then
        note "$(printf '%-34s SKIPPED (budget: %ss used of %ss)' "$name" "$(elapsed)" "$budget")"
        return 125
    fi
    local limit=$((max < left - 10 ? max : left - 10))
    local t0
    t0=$(date +%s)
    local tmp="$outdir/.stage.$$"
    echo "+ $*" >"$tmp"
    timeout -k 10 "$limit" "$@" >>"$tmp" 2>&1
    local rc=$?
    local took=$(($(date +%s) - t0))
    local result="ok"
    [ "$rc" -ne 0 ] && result="FAILED (exit $rc)"
    { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && result="TIMED OUT after ${limit}s"
    local counts
    counts=$(grep -E '^--- (PASS|FAIL|SKIP)' "$tmp" | awk '{n[$2]++} END {for (k in n) printf "%s%s %d", (c++ ? ", " : ""), k, n[k]}')
    note "$(printf '%-34s %-26s %4ss  %s' "$name" "$result" "$took" "${counts:+tests: $counts}")"
    {
        echo
        echo "===== $name (limit ${limit}s, from $((t0 - start))s): $result in ${took}s"
        cat "$tmp"
    } >>"$log"
    rm -f "$tmp"
    return "$rc"
}

# gpu_clocks_start FILE: samples the GPU's SM clock (MHz), power draw and
# limit (W), temperature and the reasons the driver gives for holding the
# clocks down (a bit mask: 0x4 the power cap, 0x20/0x40 thermal, 0x1 idle)
# every 250 ms into FILE, until gpu_clocks_stop, which adds a line to the
# summary: the clock's range and median, the largest power draw against the
# limit, and the commonest reasons with their share of the samples. Nothing
# happens without nvidia-smi.
clocks_pid=""
gpu_clocks_start() {
    clocks_file="$1"
    clocks_pid=""
    command -v nvidia-smi >/dev/null || return 0
    local field
    for field in clocks_event_reasons.active clocks_throttle_reasons.active; do
        timeout 10 nvidia-smi --query-gpu="$field" --format=csv,noheader >/dev/null 2>&1 || continue
        nvidia-smi --query-gpu=clocks.sm,power.draw,power.limit,temperature.gpu,"$field" \
            --format=csv,noheader,nounits -lms 250 >"$clocks_file" 2>&1 &
        clocks_pid=$!
        return 0
    done
}
gpu_clocks_stop() {
    [ -n "$clocks_pid" ] || return 0
    kill "$clocks_pid" 2>/dev/null
    wait "$clocks_pid" 2>/dev/null
    clocks_pid=""
    local rows n
    rows="$(grep -E '^[0-9]+, ' "$clocks_file" | tr -d ' ')"
    n="$(printf '%s\n' "$rows" | grep -c .)"
    if [ "$n" = 0 ]; then
        note "GPU clocks: no samples (see $(basename "$clocks_file"))"
        return 0
    fi
    local clk lo med hi pw lim temp reasons
    clk="$(printf '%s\n' "$rows" | cut -d, -f1 | sort -n)"
    lo="$(printf '%s\n' "$clk" | head -1)"
    hi="$(printf '%s\n' "$clk" | tail -1)"
    med="$(printf '%s\n' "$clk" | sed -n "$(((n + 1) / 2))p")"
    pw="$(printf '%s\n' "$rows" | cut -d, -f2 | sort -g | tail -1)"
    lim="$(printf '%s\n' "$rows" | cut -d, -f3 | head -1)"
    temp="$(printf '%s\n' "$rows" | cut -d, -f4 | sort -n | tail -1)"
    reasons="$(printf '%s\n' "$rows" | cut -d, -f5 | sort | uniq -c | sort -rn | head -3 |
        awk -v n="$n" '{ printf "%s%s %d%%", (i++ ? ", " : ""), $2, 100 * $1 / n }')"
    note "GPU clocks over $n samples: SM ${lo}-${hi} MHz (median $med), power up to ${pw} W of ${lim}, up to ${temp} C; reasons $reasons"
}

# gpu_mps_start LOG: starts an MPS daemon of this script's own (pipe and log
# directories under /tmp) and sets mps_up=1 when it runs; gpu_mps_stop
# stops it and appends its logs to LOG (trap it on EXIT); mpsvars N: the
# variables of a stage whose N PEs run under that daemon, 100/N % of the
# SMs each (SYMDDP_GPU_PES=N for the test binaries).
mps_up=0
gpu_mps_start() {
    mps_log="$1"
    mps_pipe="/tmp/symddp-mps-pipe-$$"
    mps_logdir="/tmp/symddp-mps-log-$$"
    mkdir -p "$mps_pipe" "$mps_logdir"
    if CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" CUDA_MPS_LOG_DIRECTORY="$mps_logdir" nvidia-cuda-mps-control -d >>"$mps_log" 2>&1; then
        mps_up=1
        note "MPS daemon started (pipe $mps_pipe)"
    else
        note "MPS daemon did not start: see $(basename "$mps_log")"
    fi
}
gpu_mps_stop() {
    if [ "$mps_up" = 1 ]; then
        echo quit | CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" timeout 20 nvidia-cuda-mps-control >>"$mps_log" 2>&1
        sleep 1
        mps_up=0
        cat "$mps_logdir"/*.log >>"$mps_log" 2>/dev/null
    fi
}
mpsvars() {
    echo "CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_logdir CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$((100 / $1)) SYMDDP_TEST_MPS=1 SYMDDP_GPU_PES=$1"
}

# gpu_build LOG FORCE: the build stage (cuda/build.sh into
# build/libsymddp_cuda.so), when FORCE is 1, the library is missing or a
# cuda/ source is newer; without a library the run ends here, with the
# summary printed. Needs $root, $summary and stage's variables.
gpu_build() {
    local log="$1" stale="$2" lib="$root/build/libsymddp_cuda.so"
    [ -f "$lib" ] || stale=1
    if [ "$stale" = 0 ] && [ -n "$(find "$root/cuda" -maxdepth 1 \( -name '*.cu' -o -name '*.h' -o -name '*.cuh' -o -name build.sh \) -newer "$lib" 2>/dev/null)" ]; then
        stale=1
    fi
    if [ "$stale" = 0 ]; then
        note "library up to date: $lib"
        return 0
    fi
    if ! stage "build library" 240 "$log" cuda/build.sh; then
        note "no library: later stages cannot run"; echo; cat "$summary"; exit 1
    fi
    tail -n 3 "$log" | sed 's/^/  /' | tee -a "$summary"
}

# gpu_mem_start FILE: samples the memory used on the GPU (MiB, every GPU
# visible, all processes) every 200 ms into FILE, until gpu_mem_stop NAME,
# which adds a line to the summary: the largest sample, as the peak memory
# of what ran in between (NAME). Nothing happens without nvidia-smi.
mem_pid=""
gpu_mem_start() {
    mem_file="$1"
    mem_pid=""
    command -v nvidia-smi >/dev/null || return 0
    nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits -lms 200 >"$mem_file" 2>&1 &
    mem_pid=$!
}
gpu_mem_stop() {
    [ -n "$mem_pid" ] || return 0
    kill "$mem_pid" 2>/dev/null
    wait "$mem_pid" 2>/dev/null
    mem_pid=""
    local peak total
    peak="$(grep -E '^[0-9]+, ' "$mem_file" | cut -d, -f1 | sort -n | tail -1)"
    total="$(grep -E '^[0-9]+, ' "$mem_file" | cut -d, -f2 | tr -d ' ' | head -1)"
    if [ -z "$peak" ]; then
        note "peak GPU memory of $1: no samples (see $(basename "$mem_file"))"
        return 0
    fi
    note "peak GPU memory of $1: ${peak} MiB of ${total} (nvidia-smi, every 200 ms)"
}
