#!/usr/bin/env bash
# Session 29, an H100: what limits the pointwise wgrad (rn50-l1-1x1-up: 1.6 TB/s on an H100 and an H200 alike,
# whatever the split count)? benchmarks/probes/ncu_wgrad_probe.py timed back to back, then under ncu beside
# cuDNN's wgrad (durations, DRAM bytes, grid sizes, throughputs); then the GPU tests of the tuner. One archive.
#   bash benchmarks/device/s29_e.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
probe=benchmarks/probes/ncu_wgrad_probe.py
timeout 120 python $probe --plain >"$k/plain.txt" 2>>"$k/log.txt"; stamp "plain: rc $?"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size
metrics=$metrics,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
timeout 200 ncu --clock-control none --metrics "$metrics" --csv python $probe >"$k/ncu.csv" 2>>"$k/log.txt"
stamp "ncu: rc $?"
timeout 150 python -m pytest -q -m gpu tests/test_search_gpu.py -x >"$k/gpu-tests-search.txt" 2>&1; stamp "gpu tests: rc $?"
(cd "$out" && tar czf s29e.tar.gz keep/)
cat "$k/plain.txt"; tail -3 "$k/gpu-tests-search.txt"
python - "$k/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; idx = {h: i for i, h in enumerate(hdr)}
per = collections.OrderedDict()
for r in rows[1:]:
    key = (r[idx["ID"]], r[idx["Kernel Name"]][:60])
    per.setdefault(key, {})[r[idx["Metric Name"]]] = (r[idx["Metric Value"]], r[idx["Metric Unit"]])
items = list(per.items())[-24:]
for (i, name), m in items:
    print(i, name, " ".join(f"{k.split('__')[1][:22]}={v[0]}{v[1]}" for k, v in m.items()))
PY
