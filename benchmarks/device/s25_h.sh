#!/usr/bin/env bash
# Session 25, call 12 (an H100): s24_i.sh again, with the new split-K reduce (on-line tuning: policy
# tune, empty user database and kernel cache, shipped databases off; benchmarks/shapes-online.json
# then shapes-longk.json; each shape's stall and its winner against torch and against the shipped
# H100 file's off-line records).
#   bash benchmarks/device/s25_h.sh OUT    (about 5 minutes)
exec bash "$(dirname "$0")/s24_i.sh" "$@"
