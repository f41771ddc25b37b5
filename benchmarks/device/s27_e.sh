#!/usr/bin/env bash
# Session 27, call 7 (an H100): the unfolded families with several filter rows per unfolded pixel (T = 2, 3:
# benchmarks/probes/conv_unfold_rows_probe.py timed the stem's lowered convolution at 60 us with T = 2 against 130 with T = 1): GPU tests,
# the stem's fprop and wgrad (b32, b128) and its fused fprop (b128, conv + bias + ReLU) tuned at 20 trials into a
# fresh database, merged into the shipped H100 file, the stem's suite rows benched and ResNet-50 b128 inference
# run from it.
# Ran with the rows build applied to 2c5ed37. benchmarks/device/s27_rows.patch is that build rebased onto 919663b,
# plus an unfolding kernel that stages each CTA's input span in shared memory (compiled on the CPU, never run:
# its GPU tests compare it bit for bit with the torch map). git apply it first. Not shipped.
# It writes 12 files under OUT and a device run returns at most 8: tune.txt, tune-*.json and tuned.sqlite were
# lost (pack them into one archive before running it again).
#   bash benchmarks/device/s27_e.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 150 python -m pytest -q -m gpu tests/test_gpu_conv_unfold.py -p no:cacheprovider >"$out/gpu-tests-unfold.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-unfold.txt")"
db=$out/tuned.sqlite
export AUTOCUTLASS_SHIPPED_KERNELS=off
AUTOCUTLASS_DB=$db AUTOCUTLASS_POLICY=cached python - <<'PY' 2>>"$out/log.txt"
import torch
import autocutlass
cl = torch.channels_last
x = torch.randn(128, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
w = (torch.randn(64, 3, 7, 7, device="cuda") / 12).to(torch.bfloat16).to(memory_format=cl)
b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
autocutlass.conv2d(x, w, b, stride=2, padding=3, activation="relu")
torch.cuda.synchronize()
PY
AUTOCUTLASS_SHIPPED_DBS=off timeout 60 python -m autocutlass.cli tune --pending --trials 20 --db "$db" \
  --json "$out/tune-fused.json" >>"$out/tune.txt" 2>>"$out/log.txt"
stamp "tune fused stem: rc $?"
tune() {  # tag file names...
  local tag=$1 file=$2; shift 2
  AUTOCUTLASS_SHIPPED_DBS=off timeout 100 python -m autocutlass.cli tune \
    --shapes "$file" $(for n in "$@"; do printf -- "--only %s " "$n"; done) --trials 20 --db "$db" \
    --json "$out/tune-$tag.json" >>"$out/tune.txt" 2>>"$out/log.txt"
  stamp "tune $tag: rc $?"
}
tune suite benchmarks/shapes-conv.json rn50-stem rn50-stem/wgrad
tune rn50 benchmarks/shapes-conv-resnet50.json rn50-b128-stem rn50-b128-stem/wgrad
unset AUTOCUTLASS_SHIPPED_KERNELS
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$out/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$out/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 60 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only rn50-stem --only rn50-stem/wgrad \
  --policy cached --no-first-call --rounds 5 --out "$out/bench-stem" >"$out/bench-stem.txt" 2>>"$out/log.txt"
stamp "bench stem: rc $?"
timeout 100 python benchmarks/probes/resnet50_e2e.py --fuse-bn --json "$out/rn50-infer.json" >"$out/rn50-infer.txt" 2>>"$out/log.txt"
stamp "resnet50 inference: rc $?"
(cd "$out" && tar czf bench-stem.tar.gz bench-stem/ && rm -rf bench-stem/ user.sqlite*)
grep -E "x torch|stem|pending" "$out/tune.txt" | grep -v dgrad | cut -c1-200
grep -E "rn50-stem" "$out/bench-stem.txt" | cut -c1-200
tail -3 "$out/rn50-infer.txt"
