#!/usr/bin/env bash
# Session 36, call h (H200): call e's ResNet-50 b128 first forwards again, this time with the shipped kernel
# archive (tuning_dbs/kernels.tar.xz) on the machine, as a user's install has it (call e's run had left it out).
set -u
export PYTHONUNBUFFERED=1
ls -la tuning_dbs/
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 200 python benchmarks/probes/resnet50_e2e.py --first-call --rounds 3 --iters 5 --json "$OUT/rn50-first-call.json" \
  >"$OUT/rn50-first-call.txt" 2>"$OUT/log.txt"
echo "resnet50: rc $?"
tail -5 "$OUT/rn50-first-call.txt"
rm -f "$OUT"/user.sqlite*
