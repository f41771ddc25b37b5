#!/usr/bin/env bash
# Session 25, call 8 (an H100): (1) the search GPU tests with the session's final code; (2) ncu of
# our long-K GEMMs (the shipped H100 records, vendor verdicts off so that ours runs) beside cuBLAS's,
# for the new reduce kernel's duration against cuBLAS's splitKreduce (session 14: 6.5 against 4.4 us).
#   bash benchmarks/device/s25_g.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
AUTOCUTLASS_CACHE_DIR=$(mktemp -d) timeout 240 python -m pytest -q -x tests/test_search_gpu.py >"$out/gpu-tests-search.txt" 2>&1
stamp "gpu tests search: rc $? $(tail -1 "$out/gpu-tests-search.txt")"
NCU="ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis
     --section Occupancy --section LaunchStats"
for spec in online:large-k online:large-k-2 longk:longk-256x512 longk:longk-384x384; do
  file=${spec%%:*}; case_=${spec#*:}
  AUTOCUTLASS_DB=$out/user.sqlite AUTOCUTLASS_POLICY=cached AUTOCUTLASS_VENDOR_VERDICTS=0 timeout 90 $NCU \
      python benchmarks/probes/ncu_classes.py --shapes "benchmarks/shapes-$file.json" --case "$case_" >"$out/ncu.txt" 2>&1
  rc=$?
  { echo "#### $spec (rc $rc)"; cat "$out/ncu.txt"; } >>"$out/ncu-all.txt"
  stamp "ncu $case_: rc $rc"
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput" "$out/ncu.txt" | grep -v "^  Section" | head -24 >&2
done
rm -f "$out/ncu.txt" "$out"/user.sqlite*
