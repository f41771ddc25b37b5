#!/usr/bin/env bash
# Session 28, call 3 (an H100): the unfolded families with the row step and the unrolled unfolding kernel
# (source hashes d6bf8642fba3bc32 / 809e43addf3ce61d retire the stem's five session-27 records): the stem's fprop
# and wgrad at b32 (suite) and b128 (ResNet-50 shapes) and its fused fprop at b128 (conv + bias + ReLU, a miss
# recorded under policy cached, then tune --pending) tuned at 24 trials into a fresh database; merged into the
# shipped H100 file on the machine and the stem's suite rows benched from it. Everything comes back in one
# archive (a device run returns at most 8 files).
#   bash benchmarks/device/s28_c.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
db=$k/tuned.sqlite
export AUTOCUTLASS_SHIPPED_KERNELS=off
AUTOCUTLASS_DB=$db AUTOCUTLASS_POLICY=cached python - <<'PY' 2>>"$k/log.txt"
import torch
import autocutlass
cl = torch.channels_last
x = torch.randn(128, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
w = (torch.randn(64, 3, 7, 7, device="cuda") / 12).to(torch.bfloat16).to(memory_format=cl)
b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
autocutlass.conv2d(x, w, b, stride=2, padding=3, activation="relu")
torch.cuda.synchronize()
PY
AUTOCUTLASS_SHIPPED_DBS=off timeout 120 python -m autocutlass.cli tune --pending --trials 24 --db "$db" \
  --json "$k/tune-fused-stem.json" >>"$k/tune.txt" 2>>"$k/log.txt"
stamp "tune fused stem: rc $?"
tune() {  # tag file names...
  local tag=$1 file=$2; shift 2
  AUTOCUTLASS_SHIPPED_DBS=off timeout 150 python -m autocutlass.cli tune \
    --shapes "$file" $(for n in "$@"; do printf -- "--only %s " "$n"; done) --trials 24 --db "$db" \
    --json "$k/tune-$tag.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $tag: rc $?"
}
tune stem benchmarks/shapes-conv.json rn50-stem rn50-stem/wgrad
tune stem-b128 benchmarks/shapes-conv-resnet50.json rn50-b128-stem rn50-b128-stem/wgrad
unset AUTOCUTLASS_SHIPPED_KERNELS
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 80 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only rn50-stem --only rn50-stem/wgrad \
  --policy cached --no-first-call --rounds 5 --out "$k/bench-stem" >"$k/bench-stem.txt" 2>>"$k/log.txt"
stamp "bench stem: rc $?"
(cd "$out" && tar czf s28c.tar.gz keep/)
grep -E "x torch|stem|pending" "$k/tune.txt" | grep -v dgrad | cut -c1-200
grep -E "rn50-stem" "$k/bench-stem.txt" | cut -c1-220
tail -3 "$k/log.txt" | cut -c1-300
