#!/usr/bin/env bash
# Session 43, call c (the GPU of call b, its refreshed shipped file committed in between): the GPU test of a
# conv2d's finals timing cuDNN's default mode in the real benchmark child, then the conv suite's backward
# directions as a user gets the shipped file (policy cached), ours timed once per cuDNN mode on that mode's
# thread (verdicts per mode), against cuDNN in each mode. Worst case about 410 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
ship=$(python -c "import re, torch; print('tuning_dbs/' + re.sub(r'[^A-Za-z0-9]+', '-', torch.cuda.get_device_name()).strip('-') + '.sqlite')")
if [ -f build/s43-refreshed.sqlite ]; then cp build/s43-refreshed.sqlite "$ship"; echo "shipped file: call b's $ship"; fi
timeout 75 python -m pytest -q -p no:cacheprovider -m gpu tests/test_search_gpu.py -k conv_finals \
  >"$k/gpu-tests-search.txt" 2>&1
echo "gpu test (conv finals): rc $? $(tail -1 "$k/gpu-tests-search.txt")"
export AUTOCUTLASS_DB=$OUT/user.sqlite
for dir in wgrad dgrad; do
  timeout 165 python -m autocutlass.cli bench --shapes $C --only "*/$dir" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$dir" >"$k/bench-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir: rc $? $(grep geomean "$k/bench-$dir.txt" | cut -c1-230)"
  rm -f "$OUT"/user.sqlite*
done
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s43c.tar.gz keep/ && rm -rf keep)
