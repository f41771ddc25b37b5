#!/usr/bin/env bash
# Session 22: where our conv entries' host time goes (cProfile of the timed calls of a wgrad with
# workspace split-K, a 3x3 fprop and a 1x1 dgrad of ResNet-50 b128), shipped database of this GPU.
#   bash benchmarks/device/s22_f.sh OUT    (about 1 minute)
set -u
out=${1:?OUT}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$out/db.sqlite
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$db" || exit 3
AUTOCUTLASS_DB="$db" timeout 200 python benchmarks/probes/conv_entry_host_probe.py --reps 5 --calls 200 \
    --only rn50-b128-pw-56-256-64 --only rn50-b128-l2-3x3 --cprofile rn50-b128-pw-56-256-64/wgrad \
    --cprofile rn50-b128-l2-3x3/fprop --cprofile rn50-b128-l2-3x3/dgrad >"$out/entry-cprofile.txt" 2>"$out/log.txt"
echo "rc $?" >&2
grep -v '^{' "$out/entry-cprofile.txt" >&2
rm -f "$db" "$db-wal" "$db-shm"
