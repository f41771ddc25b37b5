#!/usr/bin/env bash
# Session 28, call 9 (an H200): what the H200's shipped file lacks of this session, tuned at 24 trials into a fresh
# database: the stem on the unfolded families (fprop and wgrad at b32 and b128, the fused fprop at b128) and the
# conv suite's 320- and 640-channel wgrad layers and sd-1280@16 with tiles across the taps. One archive back.
#   bash benchmarks/device/s28_h.sh OUT    (about 7 minutes; exits 3 on any GPU but an H200)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run" >&2; exit 3;; esac
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
AUTOCUTLASS_SHIPPED_DBS=off timeout 100 python -m autocutlass.cli tune --pending --trials 24 --db "$db" \
  --json "$k/tune-fused-stem.json" >>"$k/tune.txt" 2>>"$k/log.txt"
stamp "tune fused stem: rc $?"
tune() {  # tag file names...
  local tag=$1 file=$2; shift 2
  AUTOCUTLASS_SHIPPED_DBS=off timeout 240 python -m autocutlass.cli tune \
    --shapes "$file" $(for n in "$@"; do printf -- "--only %s " "$n"; done) --trials 24 --db "$db" \
    --json "$k/tune-$tag.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $tag: rc $?"
}
tune stem benchmarks/shapes-conv.json rn50-stem rn50-stem/wgrad
tune stem-b128 benchmarks/shapes-conv-resnet50.json rn50-b128-stem rn50-b128-stem/wgrad
tune wgrad benchmarks/shapes-conv.json sd-320@64/wgrad sd-640@32/wgrad sdxl-640@64/wgrad sd-640@32-fp16/wgrad sd-1280@16/wgrad
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
(cd "$out" && tar czf s28h.tar.gz keep/)
grep -E "x torch|stem|wgrad" "$k/tune.txt" | grep -v "trials," | grep -v dgrad | cut -c1-200
tail -3 "$k/log.txt" | cut -c1-300
