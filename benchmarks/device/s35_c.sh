#!/usr/bin/env bash
# Session 35, call c: call b's script again after its fixes (the staged store's thread index in cooperative
# epilogues, one dense zero fill of dx where phases get no tap); it ran as a copy of s35_b.sh that differed
# only in its archive's name, which CALL=c gives.
#   bash benchmarks/device/s35_c.sh OUT    (about 6 minutes)
CALL=c exec bash "$(dirname "$0")/s35_b.sh" "$@"
