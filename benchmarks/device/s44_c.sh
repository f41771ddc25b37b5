#!/usr/bin/env bash
# Session 44, call c (the GPU of call b, on the same warm machine): the conv suite's forward and dgrad benched as a
# user gets call b's refreshed shipped file (policy cached, ours per cuDNN mode), the two re-tuned layers'
# rows printed. Worst case about 210 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
ship=$(python -c "import re, torch; print('tuning_dbs/' + re.sub(r'[^A-Za-z0-9]+', '-', torch.cuda.get_device_name()).strip('-') + '.sqlite')")
if [ -f build/s44-refreshed.sqlite ]; then cp build/s44-refreshed.sqlite "$ship"; echo "shipped file: call b's $ship"; fi
export AUTOCUTLASS_DB=$OUT/user.sqlite
for dir in fprop dgrad; do
  timeout 100 python -m autocutlass.cli bench --shapes $C --only "*/$dir" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$dir" >"$k/bench-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir: rc $? $(grep geomean "$k/bench-$dir.txt" | cut -c1-230)"
  grep -E "rn50-l3-3x3-b128|rn50-l4-3x3-b256" "$k/bench-$dir.txt" | cut -c1-60,110-200
  rm -f "$OUT"/user.sqlite*
done
(cd "$OUT" && tar czf s44c.tar.gz keep/ && rm -rf keep)
