#!/usr/bin/env bash
# Session 37, call h (H200): call f again, a second run of the conv suite's wgrad and fprop as a user gets the
# final shipped H200 file (call e's and call g's stem records).
bash "$(dirname "$0")/s37_f.sh" h
