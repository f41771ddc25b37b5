#!/usr/bin/env bash
# Session 27, call 5 (an H100): the stem as fuse_conv_bn leaves it (conv + bias + ReLU, batch 128) recorded as a
# miss by one call under policy cached into a fresh database, tuned there (tune --pending, 24 trials), merged
# into the shipped H100 file, and ResNet-50 b128 inference (unfused and fused) run again from it.
#   bash benchmarks/device/s27_d.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
db=$out/fused.sqlite
AUTOCUTLASS_DB=$db AUTOCUTLASS_POLICY=cached python - <<'PY' 2>>"$out/log.txt"
import torch
import autocutlass
cl = torch.channels_last
x = torch.randn(128, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
w = (torch.randn(64, 3, 7, 7, device="cuda") / 12).to(torch.bfloat16).to(memory_format=cl)
b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
y = autocutlass.conv2d(x, w, b, stride=2, padding=3, activation="relu")
torch.cuda.synchronize()
print(autocutlass.stats())
PY
AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off timeout 120 python -m autocutlass.cli tune --pending --trials 24 \
  --db "$db" --json "$out/tune-fused-stem.json" >"$out/tune.txt" 2>>"$out/log.txt"
stamp "tune pending: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$out/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$out/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
AUTOCUTLASS_DB=$out/user.sqlite timeout 150 python benchmarks/probes/resnet50_e2e.py --fuse-bn --json "$out/rn50-infer.json" \
  >"$out/rn50-infer.txt" 2>>"$out/log.txt"
stamp "resnet50 inference: rc $?"
rm -f "$out"/user.sqlite*
cat "$out/tune.txt" | cut -c1-200
tail -4 "$out/rn50-infer.txt"
