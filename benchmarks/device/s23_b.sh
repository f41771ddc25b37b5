#!/usr/bin/env bash
# Session 23 (any GPU): the GEMM family's fitted tile widths (hopper_gemm.check.TILE_N_FITTED) and the
# split-K scratch's raw stream handle. (1) GPU tests: the GEMM kernel cases of the fitted widths and
# every split-K / stream-K case (the scratch look-up changed), the wgrad workspace cases; (2)
# fitted_widths_probe.py: each width's rate and, on benchmarks/shapes-fitted.json's shapes, the
# model's fitted pick against its pick before, with clusters, against torch.matmul (kernels from
# .fitted-cache when carried); (3) those shapes tuned at 16 trials into a fresh database, then
# benched from it (cached policy); (4) the wgrad entry's host time after the stream-handle change on
# four ResNet-50 layers (conv_entry_host_probe.py). 7 files come back.
#   bash benchmarks/device/s23_b.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
cache=""; [ -d .fitted-cache ] && cache="--cache .fitted-cache"
timeout 240 python -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_kernels.py \
    -k "x80x or x112x or x144x or x176x or x240x or sk or streamk or deterministic" >"$out/tests.txt" 2>&1
stamp "GEMM kernel GPU tests: rc $? $(tail -1 "$out/tests.txt" | cut -c1-160)"
timeout 150 python -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_conv_backward.py -k "wgrad" >>"$out/tests.txt" 2>&1
stamp "wgrad GPU tests: rc $? $(tail -1 "$out/tests.txt" | cut -c1-160)"
timeout 200 python benchmarks/probes/fitted_widths_probe.py $cache --rounds 7 --json "$out/probe.json" >"$out/probe.txt" 2>"$out/log.txt"
stamp "probe: rc $?"; tail -12 "$out/probe.txt" >&2
db="$out/fit.sqlite"
timeout 240 python -m autocutlass.cli tune --shapes benchmarks/shapes-fitted.json --trials 16 --db "$db" \
    --json "$out/tune.json" >"$out/tune.txt" 2>>"$out/log.txt"
stamp "tune: rc $?"; tail -12 "$out/tune.txt" >&2
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$out/entry-db.sqlite" || exit 3
AUTOCUTLASS_DB="$out/entry-db.sqlite" timeout 100 python benchmarks/probes/conv_entry_host_probe.py --reps 5 \
    --only rn50-b128-l1-3x3 --only rn50-b128-l2-3x3-s2 --only rn50-b128-l3-down --only rn50-b128-pw-56-64-64 \
    --json "$out/entry.json" >"$out/entry.txt" 2>>"$out/log.txt"
stamp "entry host probe: rc $?"; grep -v '^{' "$out/entry.txt" >&2
rm -f "$out"/entry-db.sqlite*
