#!/usr/bin/env bash
# Session 21: does serving more conv directions with our kernels (lower host cost per call than
# cuDNN's) speed up host-bound training steps? ResNet-50 b128 and the UNet stack b8, cached policy,
# the shipped database, with vendor verdicts on (default: torch serves a tuned direction whose tuning
# found cuDNN faster) and off (our kernel serves every tuned direction), in alternating processes.
#   bash benchmarks/device/s21_c.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
for i in 1 2; do
  for v in 1 0; do
    AUTOCUTLASS_VENDOR_VERDICTS=$v timeout 150 python benchmarks/probes/conv_train_probe.py --models resnet50,unet \
      --rounds 7 --json "$out/train-verdicts$v-$i.json" >/dev/null 2>"$out/train-verdicts$v-$i.txt"
    stamp "verdicts=$v run $i: rc $? $(grep -E '^(resnet50|unet):' "$out/train-verdicts$v-$i.txt" | cut -c1-80 | tr '\n' ' ')"
  done
done
python - "$out" <<'PY' >&2
import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "train-verdicts*.json"))):
    d = json.load(open(f))
    for m, r in d["models"].items():
        st = r["stats_after"]
        print(os.path.basename(f), m, {k: round(v, 2) for k, v in r["ms_per_step"].items()}, "x%.3f" % r["speedup_vs_torch"],
              "fallbacks", st.get("fallbacks"), "vendor_hits", st.get("vendor_hits"))
PY
