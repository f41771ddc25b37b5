#!/usr/bin/env bash
# Session 14 on one H100, in two calls (the machine keeps /tmp/s14w between calls while warm):
#   bash benchmarks/device/s14_a.sh OUT tune   (~6 min) GPU tests of swap_qkv_; the packed q/k/v
#       shapes and the issue-21 class shapes (shapes-online.json) tuned, 16 trials
#   bash benchmarks/device/s14_a.sh OUT probe  (~8 min) Llama-3-8B 2 layers, gated MLP with and
#       without packed q/k/v (background policy, shipped DBs + the tuned q/k/v records); ncu of
#       the class shapes and two conv fprop losers, ours beside the vendor's
set -u
out=${1:?OUT}; part=${2:?tune|probe}; w=/tmp/s14w; mkdir -p "$w" "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
if [ "$part" = tune ]; then
  timeout 240 python -m pytest -q -m gpu tests/test_gpu_packed.py tests/test_gpu_swiglu.py -k "packed or swapped" \
      >"$out/gpu-tests.txt" 2>&1
  stamp "gpu tests: rc $? $(tail -3 "$out/gpu-tests.txt" | cut -c1-200)"
  AUTOCUTLASS_DB=$w/qkv.sqlite timeout 200 python -m autocutlass.cli tune --shapes benchmarks/shapes-llama-decode.json \
      --only llama8b-qkv-decode1 --only llama8b-qkv-decode4 --only llama8b-qkv-decode8 --only llama8b-qkv-decode16 \
      --only llama8b-qkv-prefill2048 \
      --trials 16 --timeout 12 --json "$out/tune-qkv.json" >"$out/tune-qkv.log" 2>&1
  stamp "qkv tune: rc $? $(grep -vE '^\[I ' "$out/tune-qkv.log" | tail -9 | cut -c1-190)"
  AUTOCUTLASS_DB=$w/classes.sqlite timeout 300 python -m autocutlass.cli tune --shapes benchmarks/shapes-online.json \
      --trials 16 --timeout 12 --json "$out/tune-classes.json" >"$out/tune-classes.log" 2>&1
  stamp "class tune: rc $? $(grep -vE '^\[I ' "$out/tune-classes.log" | tail -14 | cut -c1-190)"
  for f in qkv classes; do
    python -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$w/$f.sqlite"
    cp "$w/$f.sqlite" "$out/"
  done
  exit 0
fi
# probe (the tune part's databases: from /tmp/s14w while the machine stayed warm, else carried in s14dbs/)
for f in qkv classes; do [ -f "s14dbs/$f.sqlite" ] && cp "s14dbs/$f.sqlite" "$w/"; [ -f "$w/$f.sqlite" ] || stamp "no $f.sqlite"; done
mkdir -p "$w/shipped"
cp tuning_dbs/* "$w/shipped/"
python -m autocutlass.cli db merge tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite "$w/qkv.sqlite" \
    -o "$w/shipped/NVIDIA-H100-80GB-HBM3.sqlite" --force >/dev/null 2>&1 || stamp "merge failed (q/k/v tuned on line)"
export AUTOCUTLASS_SHIPPED_DBS=$w/shipped
[ -n "${SKIP_LLAMA:-}" ] && VARIANTS=none
for v in ${VARIANTS:-gated qkv}; do
  [ "$v" = none ] && continue
  extra=""; [ "$v" = qkv ] && extra="--qkv"
  timeout 280 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp $extra \
      --rounds 21 --reps 5 --json "$out/llama-$v.json" >"$out/llama-$v.txt" 2>&1
  stamp "llama $v: rc $? $(tail -2 "$out/llama-$v.txt" | cut -c1-250)"
done
unset AUTOCUTLASS_SHIPPED_DBS
[ -n "${SKIP_NCU:-}" ] && { stamp done; exit 0; }
NCU="ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis
     --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats"
for spec in ${NCU_CASES:-online:m-above-tile online:large-k online:few-tiles-2 online:colmajor-a online:decode1 \
            llama-decode:llama8b-kv-decode1 conv:sd-1280@16 conv:rn50-l4-3x3}; do
  file=${spec%%:*}; case_=${spec#*:}
  AUTOCUTLASS_DB=$w/classes.sqlite AUTOCUTLASS_POLICY=cached AUTOCUTLASS_VENDOR_VERDICTS=0 timeout 120 $NCU \
      python benchmarks/probes/ncu_classes.py --shapes "benchmarks/shapes-$file.json" --case "$case_" \
      >"$w/ncu.txt" 2>&1
  rc=$?
  { echo "#### $spec (rc $rc)"; cat "$w/ncu.txt"; } >>"$out/ncu-all.txt"
  stamp "ncu $case_: rc $rc $(grep -c 'Section: GPU Speed Of Light' "$w/ncu.txt") kernels profiled"
done
stamp done
