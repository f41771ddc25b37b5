"""Probe: hardware counters of our pointwise wgrad kernels beside cuDNN's (what limits them?).

The conv suite's rn50-l1-1x1-up wgrad (32x56x56x64, K 256, 1x1: dw = dy^T x, a memory-bound GEMM of
M 256, N 64, K 100352) reads at 1.6 TB/s on both an H100 and an H200 whatever the split count
(48 to 192 CTAs), where cuDNN reads 1.67 TB/s on the H100 and 2.17 on the H200. Each config given
(JSON dicts of ``hopper_conv_wgrad``, default: the shipped H100 record and two wider splits) is
compiled, checked against cuDNN's dw, then called twice beside cuDNN's wgrad; ncu profiles every
launch after the warm-up:

    ncu --clock-control none --launch-skip K --metrics gpu__time_duration.sum,dram__bytes_read.sum,\
dram__bytes_write.sum,launch__grid_size,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
dram__throughput.avg.pct_of_peak_sustained_elapsed --csv python benchmarks/probes/ncu_wgrad_probe.py [JSON]...

``--plain`` instead times each (CUDA events, 20 calls after 5, no flush: host-bound, both sides) and
prints the table; ``--timed`` times each with the tuner's protocol (``search.timing.time_callable``:
L2 written over before every call, a head start for the GPU), three interleaved rounds, and checks
that each config gives the same bits twice.
"""

from __future__ import annotations

import json
import sys

import torch

from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradFamily
from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig
from autocutlass.ops.conv.problem import ConvProblem

DEFAULTS = [
    {"tile_m": 64, "tile_n": 64, "tile_k": 128, "split_k": 12, "split_mode": "workspace", "raster": "along_n"},
    {"tile_m": 128, "tile_n": 64, "tile_k": 64, "split_k": 64, "split_mode": "workspace"},
    {"tile_m": 256, "tile_n": 64, "tile_k": 64, "split_k": 64, "split_mode": "workspace"},
]


def main() -> int:
    plain = "--plain" in sys.argv
    timed = "--timed" in sys.argv
    given = [json.loads(a) for a in sys.argv[1:] if not a.startswith("--")]
    n, h, w, c, k = 32, 56, 56, 64, 256
    problem = ConvProblem(direction="wgrad", n=n, h=h, w=w, c=c, k=k, r=1, s=1)
    fam = HopperConvWgradFamily(cache_dir=None)
    torch.backends.cudnn.benchmark = True
    x = torch.randn(n, c, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    dy = torch.randn(n, k, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wt = torch.empty(k, c, 1, 1, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)

    def cudnn() -> torch.Tensor:
        return torch.ops.aten.convolution_backward(dy, x, wt, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                   [False, True, False])[1]  # fmt: skip

    ref = cudnn().float()
    runs = []
    outs = []
    for d in given or DEFAULTS:
        cfg = HopperConvWgradConfig.from_dict(d)
        why = fam.check(cfg, problem)
        if why:
            print(f"skip {cfg.short()}: {why}", file=sys.stderr)
            continue
        run = fam.compile(cfg, problem)
        dw = torch.full_like(wt, float("nan"))
        run(dy, x, dw)
        err = ((dw.float() - ref).norm() / ref.norm()).item()
        print(f"{cfg.short()}: rel err {err:.2e}", file=sys.stderr)
        runs.append((cfg.short(), lambda run=run, dw=dw: run(dy, x, dw)))
        outs.append(dw)
    for _ in range(3):
        for _, fn in runs:
            fn()
        cudnn()
    torch.cuda.synchronize()
    if plain:
        gb = (dy.numel() + x.numel()) * 2 / 1e9
        for name, fn in [*runs, ("cudnn", cudnn)]:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20):
                fn()
            e.record()
            torch.cuda.synchronize()
            us = s.elapsed_time(e) / 20 * 1e3
            print(f"{name:50s} {us:8.1f} us  {gb / us * 1e3:6.2f} TB/s (no flush, back to back)")
        return 0
    if timed:
        # the tuner's protocol (L2 written over before each call, the GPU given a head start over the
        # host), three rounds interleaved; and each config's dw twice, bit for bit
        from autocutlass.search.timing import time_callable

        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        gb = (dy.numel() + x.numel()) * 2 / 1e9
        rounds: dict[str, list[float]] = {name: [] for name, _ in [*runs, ("cudnn", cudnn)]}
        for _ in range(3):
            for name, fn in [*runs, ("cudnn", cudnn)]:
                rounds[name].append(time_callable(fn, flush_bytes=2 * l2).median_ms * 1e3)
        for (name, fn), dw in zip(runs, outs, strict=True):
            first = dw.clone()
            fn()
            torch.cuda.synchronize()
            print(f"{name}: same bits on a second run: {torch.equal(first, dw)}", file=sys.stderr)
        base = sorted(rounds["cudnn"])[1]
        for name, us in rounds.items():
            med = sorted(us)[1]
            print(f"{name:50s} {med:8.1f} us  {gb / med * 1e3:6.2f} TB/s  x{base / med:.3f} cuDNN (flushed, median of 3)")
        return 0
    print(f"profiled from here: {len(runs)} configs then cuDNN, twice", file=sys.stderr)
    for _ in range(2):
        for _, fn in runs:
            fn()
        cudnn()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
