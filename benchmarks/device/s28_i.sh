#!/usr/bin/env bash
# Session 28, call 10 (an H200): call 9's records (the file named first) merged on the machine into the shipped H200
# file; then, as a user gets it (policy cached), the conv suite's fprop and wgrad against cuDNN. One archive back.
#   bash benchmarks/device/s28_i.sh TUNED.sqlite OUT    (about 3 minutes; exits 3 on any GPU but an H200)
set -u
tuned=${1:?TUNED}; out=${2:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run" >&2; exit 3;; esac
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$tuned" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
for d in wgrad fprop; do
  timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/$d" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$d" >"$k/bench-$d.txt" 2>>"$k/log.txt"
  stamp "bench $d: rc $? $(grep geomean "$k/bench-$d.txt" | cut -c1-200)"
done
(cd "$out" && tar czf s28i.tar.gz keep/ && rm -rf user.sqlite*)
grep -E "rn50-stem|sd-|sdxl|FALLBACK|verdict" "$k"/bench-*.txt | cut -c1-220
