"""Probe: hardware counters of the GEMM autocutlass serves for one shape beside cuBLAS's (issue
21: where the time goes on the classes we lose).

Runs one case of a shapes file (``--case NAME``, layouts 'n' row-major / 't' column-major as in
``benchmarks/shapes.json``; a case of ``shapes-conv.json`` runs its fprop, ``autocutlass.conv2d``
against ``F.conv2d`` with cudnn.benchmark, channels_last) through ``autocutlass.matmul`` (vendor verdicts off, so that our kernel
runs; what the database or the heuristic serves) and ``torch.matmul``, warms both up, then brackets
one call of each with ``cudaProfilerStart/Stop`` so that ncu with ``--profile-from-start off``
profiles exactly those launches (ours may be two: a split-K reduce after the GEMM). Prints the
dispatch counters and both times measured with CUDA events (median of 50, L2 not flushed).

GPU machine (Firecracker, ncu reads counters):
    AUTOCUTLASS_POLICY=cached AUTOCUTLASS_VENDOR_VERDICTS=0 ncu --clock-control none \\
        --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \\
        --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \\
        python benchmarks/probes/ncu_classes.py --case large-k [--shapes benchmarks/shapes-online.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="benchmarks/shapes-online.json")
    ap.add_argument("--case", required=True)
    ns = ap.parse_args()
    import torch

    import autocutlass

    import torch.nn.functional as F

    cases = {c["name"]: c for c in json.loads(open(ns.shapes).read())["cases"]}
    c = cases[ns.case]
    bf = torch.bfloat16 if c.get("dtype", "bf16") == "bf16" else torch.float16
    if "R" in c:  # a conv suite case: fprop, channels_last, against cuDNN in benchmark mode
        torch.backends.cudnn.benchmark = True
        x = torch.randn(c["N"], c["C"], c["H"], c["W"], device="cuda", dtype=bf).to(memory_format=torch.channels_last)
        w = torch.randn(c["K"], c["C"], c["R"], c["S"], device="cuda", dtype=bf).to(memory_format=torch.channels_last)
        geo = {"stride": tuple(c["stride"]), "padding": tuple(c["pad"]), "dilation": tuple(c["dilation"])}
        run_ours, run_torch = (lambda: autocutlass.conv2d(x, w, **geo)), (lambda: F.conv2d(x, w, **geo))
        y = F.conv2d(x, w, **geo)
        flops = 2.0 * y.numel() * c["C"] * c["R"] * c["S"]
    else:
        m, n, k, layout = c["M"], c["N"], c["K"], c.get("layout", "nn")
        a = torch.randn(m, k, device="cuda", dtype=bf) if layout[0] == "n" else torch.randn(k, m, device="cuda", dtype=bf).t()
        b = torch.randn(k, n, device="cuda", dtype=bf) if layout[1] == "n" else torch.randn(n, k, device="cuda", dtype=bf).t()
        run_ours, run_torch = (lambda: autocutlass.matmul(a, b)), (lambda: torch.matmul(a, b))
        flops = 2.0 * m * n * k
    for _ in range(5):
        ours, want = run_ours(), run_torch()
    torch.cuda.synchronize()
    err = float((ours.float() - want.float()).abs().max())

    def ms(fn) -> float:  # noqa: ANN001
        ts = []
        for _ in range(50):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        return statistics.median(ts)

    t_ours, t_torch = ms(run_ours), ms(run_torch)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    run_ours()
    run_torch()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(json.dumps({"case": c, "max_abs_err": err, "stats": autocutlass.stats().as_dict(),
                      "ms_ours": t_ours, "ms_torch": t_torch, "vs_torch": t_torch / t_ours,
                      "tflops_ours": flops / t_ours / 1e9, "tflops_torch": flops / t_torch / 1e9}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
