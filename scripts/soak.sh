#!/usr/bin/env bash
# Soak test: train for a long time at --pes 8 and report, per PE, resident
# memory (VmRSS) and open file descriptors over time. They must stay flat.
# Not part of CI.
#
#   scripts/soak.sh [DURATION_SECONDS (default 1200)] [INTERVAL (default 60)] [extra train flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-1200}
every=${2:-60}
shift $(( $# > 2 ? 2 : $# )) || true

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/train
go build -o "$bin" ./cmd/train
log=$tmp/train.log
"$bin" --pes 8 --model mlp --epochs 100000 --log-every 1000 --no-progress "$@" >"$log" 2>&1 &
launcher=$!
trap 'kill -INT $launcher 2>/dev/null || true; wait $launcher 2>/dev/null || true; rm -rf "$tmp"' EXIT

sleep 5
pes=$(pgrep -P "$launcher" | tr '\n' ' ')
[ -n "$pes" ] || { echo "no PE processes; train said:"; cat "$log"; exit 1; }
printf '%8s' "t(s)"
i=0; for p in $pes; do printf ' %14s' "pe$i rss/fds"; i=$((i+1)); done; echo
declare -A first last
start=$(date +%s)
n=0
while :; do
    now=$(( $(date +%s) - start ))
    printf '%8d' "$now"
    for p in $pes; do
        if [ -r /proc/$p/status ]; then
            rss=$(awk '/VmRSS/ {print int($2/1024)}' /proc/$p/status)
            fds=$(ls /proc/$p/fd | wc -l)
            printf ' %9sMiB/%3s' "$rss" "$fds"
            # the baseline is the second sample: the first is taken during start-up
            [ "$n" -eq 1 ] && first[$p]="$rss $fds"
            last[$p]="$rss $fds"
        else
            printf ' %14s' "gone"
        fi
    done
    echo
    n=$((n+1))
    [ "$now" -ge "$dur" ] && break
    sleep "$every"
done
echo
echo "after start-up -> last (RSS MiB, fds) per PE:"
i=0; bad=0
for p in $pes; do
    read -r r0 f0 <<<"${first[$p]:-0 0}"; read -r r1 f1 <<<"${last[$p]:-0 0}"
    flag=""
    if [ "$f1" -gt "$f0" ] || [ "$r1" -gt $(( r0 + r0 / 10 + 2 )) ]; then flag="  <- grew"; bad=1; fi
    echo "  pe$i: $r0 -> $r1 MiB, $f0 -> $f1 fds$flag"
    i=$((i+1))
done
tail -3 "$log"
exit $bad
