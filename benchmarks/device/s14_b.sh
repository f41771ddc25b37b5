#!/usr/bin/env bash
# Session 14, part B (one H200, ~7 min): the Llama-3-8B decode GEMMs that a Llama with packed q/k/v
# and fused-SwiGLU MLPs runs (o_proj, down, lm_head and the packed q/k/v weight at batch 1, 4, 8;
# the packed q/k/v at a 2048-token prefill) tuned on this GPU (16 trials), merged into a copy of
# the shipped databases; then the Llama stall/steady-state probe with and without swap_qkv_.
#   bash benchmarks/device/s14_b.sh OUT
set -u
out=${1:?OUT}; w=/tmp/s14b; mkdir -p "$w" "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
only=""
for m in 1 4 8; do for c in q down lmhead qkv; do only="$only --only llama8b-$c-decode$m"; done; done
AUTOCUTLASS_DB=$w/llama.sqlite timeout 300 python -m autocutlass.cli tune --shapes benchmarks/shapes-llama-decode.json \
    $only --only llama8b-qkv-prefill2048 --trials 16 --timeout 12 --json "$out/tune-llama.json" >"$out/tune-llama.log" 2>&1
stamp "tune: rc $? $(grep -vE '^\[I ' "$out/tune-llama.log" | tail -15 | cut -c1-190)"
python -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$w/llama.sqlite"
cp "$w/llama.sqlite" "$out/"
mkdir -p "$w/shipped" && cp tuning_dbs/* "$w/shipped/"
python -m autocutlass.cli db merge tuning_dbs/NVIDIA-H200.sqlite "$w/llama.sqlite" -o "$w/shipped/NVIDIA-H200.sqlite" \
    --force >"$w/merge.log" 2>&1 || stamp "merge failed: $(tail -2 "$w/merge.log")"
export AUTOCUTLASS_SHIPPED_DBS=$w/shipped
for v in qkv gated; do
  extra=""; [ "$v" = qkv ] && extra="--qkv"
  timeout 200 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp $extra \
      --rounds 21 --reps 5 --json "$out/llama-$v.json" >"$out/llama-$v.txt" 2>&1
  stamp "llama $v: rc $? $(tail -2 "$out/llama-$v.txt" | cut -c1-250)"
done
stamp done
