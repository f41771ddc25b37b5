#!/usr/bin/env bash
# Session 44, call a. On an H200: session 43's call b for this GPU's shipped file (s43_b.sh: the conv suite's
# records re-timed against cuDNN in both modes by `tune --verdicts`, the forward benched per mode as a user gets
# the refreshed file), which no H200 ran yet. On an H100 (its file re-timed in session 43): the conv suite's three
# directions benched as a user gets the shipped file with GPU-time verdicts (AUTOCUTLASS_VENDOR_HOST=0), the
# measured counterpart of session 43's arithmetic. Worst case about 550 s.
set -u
export PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "gpu: $gpu"
case "$gpu" in
  *H200*) exec bash benchmarks/device/s43_b.sh ;;
esac
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
export AUTOCUTLASS_DB=$OUT/user.sqlite AUTOCUTLASS_VENDOR_HOST=0
for dir in fprop wgrad dgrad; do
  timeout 165 python -m autocutlass.cli bench --shapes $C --only "*/$dir" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-host0-$dir" >"$k/bench-host0-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir (GPU-time verdicts): rc $? $(grep geomean "$k/bench-host0-$dir.txt" | cut -c1-230)"
  rm -f "$OUT"/user.sqlite*
done
(cd "$OUT" && tar czf s44a.tar.gz keep/ && rm -rf keep)
