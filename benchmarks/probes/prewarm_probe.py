"""Probe: what ``autocutlass.prewarm`` saves a process's first tuning.

For each variant, a fresh process (clean imports) with an empty user database, an empty kernel
cache, the shipped databases off and policy ``tune``: import torch and autocutlass, make the
operands, then (``prewarm``) call ``autocutlass.prewarm()`` or (``cold``) nothing, wait
``--idle`` seconds (the program's own start-up: loading weights), and time the first
``autocutlass.matmul`` of a bf16 square GEMM (synchronised): the tuning of its shape, plus
whatever the tuning processes still need to start. Variants alternate ``--repeats`` times.

GPU machine:
    python benchmarks/probes/prewarm_probe.py [--size 4096] [--idle 8] [--repeats 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
import autocutlass
size, idle, variant = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
started = autocutlass.prewarm() if variant == "prewarm" else False
time.sleep(idle)
t1 = time.perf_counter()
y = autocutlass.matmul(a, b)
torch.cuda.synchronize()
first = time.perf_counter() - t1
ok = torch.allclose(y.float(), (a @ b).float(), atol=1.0, rtol=0.05)
s = autocutlass.stats()
print(json.dumps({"variant": variant, "prewarm_started": started, "first_call_s": first, "correct": bool(ok),
                  "tunes": s.tunes, "imports_s": t1 - t0 - idle}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--idle", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    runs = []
    for i in range(args.repeats):
        for variant in ("cold", "prewarm") if i % 2 == 0 else ("prewarm", "cold"):
            with tempfile.TemporaryDirectory() as tmp:
                env = {**os.environ, "AUTOCUTLASS_CACHE_DIR": tmp, "AUTOCUTLASS_DB": f"{tmp}/user.sqlite",
                       "AUTOCUTLASS_SHIPPED_DBS": "off", "AUTOCUTLASS_POLICY": "tune"}  # fmt: skip
                t = time.perf_counter()
                r = subprocess.run([sys.executable, "-c", CHILD, str(args.size), str(args.idle), variant], env=env,
                                   capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
                line = (r.stdout.strip().splitlines() or ["{}"])[-1]
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    row = {"variant": variant, "error": (r.stderr or r.stdout)[-1500:]}
                row["process_s"] = time.perf_counter() - t
                runs.append(row)
                print(json.dumps(row), flush=True)
    summary = {}
    for variant in ("cold", "prewarm"):
        firsts = [r["first_call_s"] for r in runs if r.get("variant") == variant and "first_call_s" in r]
        summary[variant] = {"first_call_s_median": statistics.median(firsts) if firsts else None, "runs": len(firsts)}
    print(f"first call after {args.idle:.0f} s of idle, {args.size}^3 bf16, empty DB and kernel cache: "
          + ", ".join(f"{v} {s['first_call_s_median'] if s['first_call_s_median'] is None else round(s['first_call_s_median'], 2)} s"
                      for v, s in summary.items()))  # fmt: skip
    if args.json:
        import torch

        with open(args.json, "w") as f:
            json.dump({"what": "first tuned call of a fresh process, with and without autocutlass.prewarm() "
                               f"{args.idle} s before it (benchmarks/probes/prewarm_probe.py)",
                       "gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d (UTC)", time.gmtime()),
                       "torch": torch.__version__, "size": args.size, "idle_s": args.idle, "runs": runs,
                       "summary": summary}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
