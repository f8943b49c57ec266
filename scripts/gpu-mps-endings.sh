#!/usr/bin/env bash
# Issue 13 on the GPU host: the launcher's private MPS daemon is stopped
# however a job ends. Runs `train --backend nvshmem --pes 4 --mps on` and ends
# it five ways, then looks for nvidia-cuda-mps processes:
#
#   normal      the job runs to the end (--max-steps)
#   crash       PE 1 SIGKILLs itself at step 20 (--fault-inject)
#   sigint      the launcher gets SIGINT while training
#   sigterm     the launcher gets SIGTERM while training
#   sigkill     the launcher gets SIGKILL (it cannot clean up: its daemon is
#               expected to survive), then a second, short job starts and
#               must stop the stale daemon of the first one's run directory
#
#   scripts/gpu-mps-endings.sh [--bin DIR] [--data-dir DIR]
#
# Needs the train binary (.device/bin/train, from scripts/gpu-compute-
# prepare.sh) and build/libsymddp_cuda.so. Prints one line per ending and
# exits non-zero if any daemon is left. Every command keeps
# NVSHMEM_DISABLE_NVLS=1.
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin="$root/.device/bin"
data="$root/.device/data/fashion-mnist"
while [ "$#" -gt 0 ]; do
    case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --data-dir) data="$2"; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu-mps-endings.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
# shellcheck source=scripts/gpu-lib.sh
. "$root/scripts/gpu-lib.sh"
gpu_env # NVSHMEM_DISABLE_NVLS=1, NVSHMEM's plugins on LD_LIBRARY_PATH
gpu_unpack "$bin" # train comes as .xz from scripts/gpu-compute-prepare.sh
[ -d "$data" ] || data=/usr/share/datasets/fashion-mnist
train=("$bin/train" --backend nvshmem --pes 4 --mps on --gpu-lib "$root/build/libsymddp_cuda.so"
    --data-dir "$data" --no-progress --eval-every 0 --log-every 100)
log="${OUT:-$root/.device/out}/mps-endings.log"
mkdir -p "$(dirname "$log")"
: >"$log"

daemons() { pgrep nvidia-cuda-mps || true; } # by process name (comm), not command line
fail=0
report() { # name, exit status, expect-daemon (0/1)
    local left
    left="$(daemons | tr '\n' ' ')"
    if [ "$3" = 1 ]; then
        if [ -n "$left" ]; then echo "ok   $1: rc=$2, daemon left as expected (pids $left)"; else echo "FAIL $1: rc=$2, expected the killed launcher's daemon to remain"; fail=1; fi
    elif [ -z "$left" ]; then
        echo "ok   $1: rc=$2, no nvidia-cuda-mps process left"
    else
        echo "FAIL $1: rc=$2, left: $(ps -o pid,args -p "${left// /,}" | tail -n +2 | tr '\n' ';')"
        fail=1
    fi
}
# wait_training PID: until the job logged a step (at most 60 s).
wait_training() {
    for _ in $(seq 600); do
        grep -q "^epoch .* step " "$log.cur" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
run_signal() { # name, signal
    : >"$log.cur"
    "${train[@]}" --epochs 1000 --log-every 10 >"$log.cur" 2>&1 &
    local pid=$!
    wait_training "$pid" || echo "note $1: no step logged before the signal"
    kill -s "$2" "$pid"
    timeout 60 tail --pid="$pid" -f /dev/null
    wait "$pid"
    local rc=$?
    { echo "== $1"; cat "$log.cur"; } >>"$log"
    sleep 1
    report "$1" "$rc" 0
}

if [ -n "$(daemons)" ]; then echo "note: nvidia-cuda-mps processes before the test: $(daemons | tr '\n' ' ')"; fi
: >"$log.cur"
timeout 120 "${train[@]}" --max-steps 200 >"$log.cur" 2>&1
rc=$?
{ echo "== normal"; cat "$log.cur"; } >>"$log"
report normal "$rc" 0

: >"$log.cur"
timeout 120 "${train[@]}" --max-steps 2000 --fault-inject pe=1,step=20,mode=kill >"$log.cur" 2>&1
rc=$?
{ echo "== crash"; cat "$log.cur"; } >>"$log"
report "crash (PE 1 SIGKILLed)" "$rc" 0
grep -m1 -i "PE 1" "$log.cur" | sed 's/^/     /'

run_signal sigint INT
run_signal sigterm TERM

: >"$log.cur"
"${train[@]}" --epochs 1000 --log-every 10 >"$log.cur" 2>&1 &
pid=$!
wait_training "$pid" || echo "note sigkill: no step logged before the signal"
kill -9 "$pid"
wait "$pid"
rc=$?
sleep 2
{ echo "== sigkill"; cat "$log.cur"; } >>"$log"
report "sigkill of the launcher" "$rc" 1
: >"$log.cur"
timeout 120 "${train[@]}" --pes 2 --max-steps 20 >"$log.cur" 2>&1
rc=$?
{ echo "== after sigkill"; cat "$log.cur"; } >>"$log"
sleep 1
report "next start after the SIGKILL (stale daemon stopped)" "$rc" 0
rm -f "$log.cur"
exit $fail
