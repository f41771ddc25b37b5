#!/usr/bin/env bash
# Session 22: the conv site's mixed rule (a site whose backward torch computes runs our forward in
# training only where its vendor margin beats conv_site.NODE_HOST_MS; else F.conv2d) against keeping
# our forward ('ours', the rule before). Shipped database of this GPU (copied to OUT/db.sqlite).
# (1) host ms per step until the last launch and wall per step (conv_train_host_probe, 3 steps, twice
# per mode); (2) ResNet-50 b128 training, alternating processes, PAIRS pairs (3); (3) the UNet stack b8,
# one pair; (4) GPU tests of conv backward and torch ops (TESTS=0 skips them).
#   [PAIRS=5] [TESTS=0] bash benchmarks/device/s22_g.sh OUT    (about 6 minutes with 3 pairs)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$out/db.sqlite
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$db" || exit 3
for i in 1 2; do
  for m in rule ours; do
    extra=(); [ "$m" = ours ] && extra=(--mixed-sites ours)
    AUTOCUTLASS_DB="$db" timeout 90 python benchmarks/probes/conv_train_host_probe.py --model resnet50 --steps 3 \
      --no-cprofile "${extra[@]}" 2>>"$out/log.txt" | grep -E "^(autocutlass|torch):" | sed "s/^/$m $i /" >>"$out/host.txt"
    stamp "host $m $i: $(tail -2 "$out/host.txt" | tr '\n' ' ')"
  done
done
run() {  # model, mode, pair index
  extra=(); [ "$2" = ours ] && extra=(--mixed-sites ours)
  AUTOCUTLASS_DB="$db" timeout 90 python benchmarks/probes/conv_train_probe.py --models "$1" --rounds 7 "${extra[@]}" \
    2>>"$out/log.txt" | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['$1']; print(json.dumps({'model': '$1', 'mode': '$2', 'run': $3, 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'grad_err': r['grad_rel_err_max'], 'stats': r['stats_after']}))" >>"$out/train_ab.jsonl"
  stamp "$1 $2 run $3: $(tail -1 "$out/train_ab.jsonl" | cut -c1-150)"
}
for i in $(seq "${PAIRS:-3}"); do
  if [ $((i % 2)) = 1 ]; then run resnet50 rule $i; run resnet50 ours $i; else run resnet50 ours $i; run resnet50 rule $i; fi
done
run unet rule 1; run unet ours 1
[ "${TESTS:-1}" = 0 ] || timeout 150 python -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_conv_backward.py tests/test_gpu_torch_ops.py \
  >"$out/tests.txt" 2>&1
stamp "GPU tests: rc $? $(tail -1 "$out/tests.txt" | cut -c1-160)"
rm -f "$db" "$db-wal" "$db-shm"
