#!/usr/bin/env bash
# Session 39, call g (H200): the shipped H200 file as it lands (rekeyed to the N-split sources: all 252 records
# carried with the same generated code; calls b and c's tunes of benchmarks/shapes-nsplit.json merged, pruned),
# as a user gets it (policy cached): the public GEMM suite, the M-residue list and shapes-online.json against
# torch.matmul; the tuner's GPU tests (the seeds and the wave model changed).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
run_bench() {  # name shapes-file timeout rounds
  rm -f "$OUT"/user.sqlite*
  timeout "$3" python -m autocutlass.cli bench --shapes "$2" --policy cached --no-first-call --rounds "$4" \
    --out "$k/bench-$1" >"$k/bench-$1.txt" 2>>"$k/log.txt"
  echo "bench $1: rc $? $(grep geomean "$k/bench-$1.txt" | cut -c1-200)"
}
run_bench suite benchmarks/shapes.json 170 7
run_bench nsplit benchmarks/shapes-nsplit.json 110 5
run_bench online benchmarks/shapes-online.json 100 5
rm -f "$OUT"/user.sqlite*
timeout 45 python -m pytest -q -p no:cacheprovider tests/test_search_gpu.py >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
for f in suite nsplit online; do grep -v "^hit-path" "$k/bench-$f.txt" | cut -c1-150; done
rm -f "$OUT"/user.sqlite*
(cd "$OUT" && tar czf s39g.tar.gz keep/ && rm -rf keep)
