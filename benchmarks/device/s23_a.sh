#!/usr/bin/env bash
# For the next session (any GPU, a quiet machine if one comes): (1) host microseconds per ResNet-50
# b128 conv entry call with the wgrad runner's split-K scratch look-up timed apart (where our wgrad's
# 20-35 us over cuDNN's per call go, conv_entry_host_probe.py); (2) s22_g.sh with 4 pairs: session
# 22's conv site rule (kernels' vendor margins summed against conv_site.NODE_HOST_MS) against the
# rule before it, host time per step, ResNet-50 b128 and the UNet stack b8, GPU tests of conv
# backward and torch ops. 6 files come back.
#   bash benchmarks/device/s23_a.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$out/entry-db.sqlite" || exit 3
AUTOCUTLASS_DB="$out/entry-db.sqlite" timeout 200 python benchmarks/probes/conv_entry_host_probe.py --reps 5 \
    --json "$out/entry.json" >"$out/entry.txt" 2>/dev/null
echo "entry host probe: rc $?" >&2
grep -v '^{' "$out/entry.txt" >&2
rm -f "$out"/entry-db.sqlite*
PAIRS=4 bash benchmarks/device/s22_g.sh "$out"
