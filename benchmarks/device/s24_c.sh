#!/usr/bin/env bash
# Session 24, call 3 (an H100): the wave model's split picks now come in 2-CTA clusters too
# (CPU-tested only): benchmarks/shapes-online.json and the new shapes-longk.json tuned at 16 trials
# into a fresh database (OUT/tuned.sqlite); then split_probe.py on the two cases of one or two
# 128x128 output tiles (wide workspace splits, kernels precompiled into split-cache.tar.xz).
#   bash benchmarks/device/s24_c.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
tuned="$out/tuned.sqlite"
for f in online longk; do
  timeout 200 python -m autocutlass.cli tune --shapes "benchmarks/shapes-$f.json" --trials 16 --db "$tuned" \
      --json "$out/tune-$f.json" 2>>"$out/log.txt" | tail -13 >&2
  stamp "tune $f done"
done
python -c "import sqlite3; c = sqlite3.connect('$tuned'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$tuned-wal" "$tuned-shm"
tar -xJf split-cache.tar.xz
timeout 200 python benchmarks/probes/split_probe.py --cache .split-cache --json "$out/split-probe-2.json" \
    --only 256x128x131072-nn 256x256x131072-nt >"$out/split-probe-2.txt" 2>>"$out/log.txt"
stamp "split probe: rc $?"
grep "^best" "$out/split-probe-2.txt" >&2
