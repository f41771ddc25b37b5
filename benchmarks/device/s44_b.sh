#!/usr/bin/env bash
# Session 44, call b (either GPU; planned for the next session with a GPU): the conv kernel's 192-row tiles (the
# GEMM kernel's N-split consumers, commit 8237e01), never run on a GPU yet. 1) Their GPU tests (the fprop cases and
# the dgrad cases, one of them 192 rows). 2) The layers the cost model seeds them for (n_split_seeds: ResNet-50's
# 3x3 stage-3 layer at batch 128 and stage-4 layer at batch 256, forward and dgrad) tuned again into this GPU's
# shipped file, 16 trials each (the search resumes: the stored trials stay, the new seeds are tried first). The
# refreshed file comes back under $OUT and stays in build/ for call c (s44_c.sh: the benches). Worst case about
# 570 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
ship=$(python -c "import re, torch; print('tuning_dbs/' + re.sub(r'[^A-Za-z0-9]+', '-', torch.cuda.get_device_name()).strip('-') + '.sqlite')")
echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); shipped file: $ship"
timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_conv.py tests/test_gpu_conv_backward.py \
  -k "192x or test_dgrad_on_the_fprop_kernel" >"$k/gpu-tests-192.txt" 2>&1
echo "gpu tests (192-row conv): rc $? $(tail -1 "$k/gpu-tests-192.txt")"
for case in rn50-l3-3x3-b128/fprop rn50-l4-3x3-b256/fprop rn50-l3-3x3-b128/dgrad rn50-l4-3x3-b256/dgrad; do
  tag=$(echo "$case" | tr '/' '-')
  timeout 90 python -m autocutlass.cli tune --shapes $C --only "$case" --trials 16 --db "$ship" \
    --json "$k/tune-$tag.json" >"$k/tune-$tag.txt" 2>>"$k/log.txt"
  echo "tune $case: rc $? $(tail -1 "$k/tune-$tag.txt" | cut -c1-200)"
done
python -c "import sqlite3; c = sqlite3.connect('$ship'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$ship-wal" "$ship-shm"; cp "$ship" "$OUT/"; mkdir -p build && cp "$ship" build/s44-refreshed.sqlite
(cd "$OUT" && tar czf s44b.tar.gz keep/ && rm -rf keep)
