"""Probe: hardware counters of hopper_conv configs beside cuDNN on one conv layer (what limits them?).

GPU machine (ncu reads counters; only the launches between cudaProfilerStart/Stop are profiled):
    ncu --profile-from-start off --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section LaunchStats \
        python benchmarks/probes/conv_ncu_probe.py N H W C K R S PAD "{config dict}" ["{config dict}" ...]
Compiles and verifies each config (against F.conv2d in float32, NaN-poisoned output), warms everything up,
then runs each config once and F.conv2d (cudnn.benchmark on, channels_last, bf16) once inside the
profiled range; no L2 flush kernels, so every profiled launch is one of the convolutions (and a
workspace split's reduce kernel).
"""

from __future__ import annotations

import ast
import math
import sys

import torch
import torch.nn.functional as F

from autocutlass.kernels.hopper_conv import HopperConvConfig, HopperConvFamily, check
from autocutlass.ops.conv.problem import ConvProblem


def main() -> int:
    n, h, w, c, k, r, s, pad = (int(v) for v in sys.argv[1:9])
    configs = [HopperConvConfig.from_dict(ast.literal_eval(a)) for a in sys.argv[9:]]
    prob = ConvProblem("fprop", n, h, w, c, k, r, s, pad_h=pad, pad_w=pad)
    torch.backends.cudnn.benchmark = True
    cl = torch.channels_last
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, c, h, w, device="cuda", generator=gen).bfloat16().to(memory_format=cl)
    wt = (torch.randn(k, c, r, s, device="cuda", generator=gen) / math.sqrt(c * r * s)).bfloat16().to(memory_format=cl)
    y = torch.empty(n, k, prob.p, prob.q, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    ref = F.conv2d(x.float(), wt.float(), None, padding=pad)
    fam = HopperConvFamily(cache_dir=None)
    runs = []
    for cfg in configs:
        why = check(cfg, prob)
        if why is not None:
            print(f"{cfg.short()}: infeasible: {why}")
            continue
        run = fam.compile(cfg, prob)
        y.fill_(float("nan"))
        run(x, wt, y)
        torch.cuda.synchronize()
        err = float(torch.linalg.vector_norm(y.float() - ref) / torch.linalg.vector_norm(ref))
        print(f"launch {len(runs)}: {cfg.short()} rel err {err:.2e}")
        runs.append(run)
    for _ in range(3):
        for run in runs:
            run(x, wt, y)
        F.conv2d(x, wt, None, padding=pad)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for run in runs:
        run(x, wt, y)
    F.conv2d(x, wt, None, padding=pad)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"then cuDNN; {len(runs)} configs profiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
