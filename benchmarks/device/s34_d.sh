#!/usr/bin/env bash
# Session 34, call d (H200; on an H100 it serves that GPU's file): the few-tile, long-K GEMMs with the interleaved split order
# (HopperGemmConfig.interleave) and the cluster-padding rule of the model's picks. 1. benchmarks/shapes-longk.json
# and shapes-online.json's four few-tile / long-K cases against torch.matmul as a user gets the shipped file
# (rekeyed to the new sources: the records of before); 2. each tuned again, 16 trials from the priors (the shipped
# record first, then the seeds), into a fresh database; 3. merged on the machine into the shipped file (the faster
# record of each problem stays); 4. the same bench again.
#   bash benchmarks/device/s34_d.sh OUT    (about 7 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$k/tuned.sqlite
case "$gpu" in *H200*) ship=tuning_dbs/NVIDIA-H200.sqlite ;; *) ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite ;; esac
export AUTOCUTLASS_DB=$out/user.sqlite
online="--only large-k --only large-k-2 --only few-tiles --only few-tiles-2"
bench() {  # $1: before|after
  timeout 80 python -m autocutlass.cli bench --shapes benchmarks/shapes-longk.json --policy cached --no-first-call \
    --rounds 5 --out "$k/bench-longk-$1" >"$k/bench-longk-$1.txt" 2>>"$k/log.txt"
  stamp "bench longk $1: rc $? $(grep geomean "$k/bench-longk-$1.txt" | cut -c1-150)"
  timeout 80 python -m autocutlass.cli bench --shapes benchmarks/shapes-online.json $online --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-online-$1" >"$k/bench-online-$1.txt" 2>>"$k/log.txt"
  stamp "bench online $1: rc $? $(grep geomean "$k/bench-online-$1.txt" | cut -c1-150)"
  rm -f "$out"/user.sqlite*
}
bench before
for name in longk-384x384 longk-256x512 longk-768x768 longk-512x256 longk-320x640; do
  timeout 60 python -m autocutlass.cli tune --shapes benchmarks/shapes-longk.json --only "$name" --trials 16 \
    --family hopper_gemm --db "$db" --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
for name in large-k large-k-2 few-tiles few-tiles-2; do
  timeout 60 python -m autocutlass.cli tune --shapes benchmarks/shapes-online.json --only "$name" --trials 16 \
    --family hopper_gemm --db "$db" --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
bench after
(cd "$out" && tar czf s34d.tar.gz keep/)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-180
for f in before after; do grep -v "^hit-path" "$k/bench-longk-$f.txt" "$k/bench-online-$f.txt" | cut -c1-170; done
