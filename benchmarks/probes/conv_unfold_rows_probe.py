"""Probe: how much of an unfolded stem's time is its implicit GEMM's im2col requests. The lowered
convolution alone (``hopper_conv`` on random inputs of the lowered layer's shapes, no unfolding)
for a row-unfolded input holding T filter rows per pixel: T = 1 is the shipped lowering (C' = S*C
rounded up, R taps); T = 2, 3 stack T input rows into the channels (C' = T*S*C rounded up, ceil(R/T)
taps at T times the dilation over an input whose padding rows are materialized, so the lowered
layer has no padding along H). Fewer taps with wider rows means fewer, fuller im2col requests
per output pixel, for a larger unfolded input. Each candidate (the first ``--seeds`` seeds of the
lowered layer) is timed in interleaved rounds with cuDNN on the original layer
(``autocutlass.search.timing.time_callable``, L2 flushed); medians.

    python benchmarks/probes/conv_unfold_rows_probe.py [--seeds 3] [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

LAYERS = {
    "rn50-stem-b32": dict(n=32, h=224, w=224, c=3, k=64, r=7, s=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3),
    "rn50-stem-b128": dict(n=128, h=224, w=224, c=3, k=64, r=7, s=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3),
}


def lowered(p: Any, rows: int) -> Any:
    """The lowered layer for ``rows`` (T) filter rows per unfolded pixel."""
    import dataclasses

    from autocutlass.kernels.hopper_conv_unfold.lowering import unfolded_problem

    if rows == 1:
        return unfolded_problem(p)
    taps = -(-p.r // rows)
    assert rows * (taps - 1) == p.r - 1, (rows, taps)
    c = -(-(rows * p.s * p.c) // 8) * 8
    return dataclasses.replace(
        p, h=p.h + 2 * p.pad_h, w=p.q, c=c, r=taps, s=1, pad_h=0, pad_w=0, stride_w=1, dil_h=rows * p.dil_h, dil_w=1,
        align_x=16, align_w=16,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    from autocutlass.kernels.hopper_conv import HopperConvFamily
    from autocutlass.ops.conv import evaluation as ev
    from autocutlass.ops.conv.problem import ConvProblem
    from autocutlass.search.timing import time_callable

    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    fam = HopperConvFamily()
    rows_out: list[dict[str, Any]] = []
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}", file=sys.stderr)
    for name, geo in LAYERS.items():
        p = ConvProblem(direction="fprop", align_x=2, align_w=2, **geo)  # type: ignore[arg-type]
        base_inputs = ev.make_inputs(p, device=dev, seed=1)
        base = ev.torch_baseline(p, base_inputs)
        cands: dict[str, Any] = {}
        for t in (1, 2, 3):
            lp = lowered(p, t)
            assert (lp.p, lp.q) == (p.p, p.q), (lp.describe(), p.describe())
            inputs = ev.make_inputs(lp, device=dev, seed=2)
            ref = ev.reference(lp, inputs)
            for cfg in fam.seeds(lp)[: args.seeds]:
                runner = fam.compile(cfg, lp)
                ok, why = ev.verify(runner, lp, inputs, ref)
                if not ok:
                    print(f"{name} T={t} {cfg.short()}: WRONG {why}", file=sys.stderr)
                    continue
                cands[f"T={t} C'={lp.c} R'={lp.r} {cfg.short()}"] = (lambda r=runner, i=inputs: i.run(r))
        times: dict[str, list[float]] = {k: [] for k in (*cands, "cudnn-bench")}
        for rnd in range(args.rounds):
            order = list(cands.items())
            if rnd % 2:
                order.reverse()
            with torch.backends.cudnn.flags(enabled=True, benchmark=True):
                times["cudnn-bench"].append(time_callable(base, flush_bytes=2 * l2).median_ms)
            for k, fn in order:
                times[k].append(time_callable(fn, flush_bytes=2 * l2).median_ms)
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, ms in med.items():
            rows_out.append({"layer": name, "candidate": k, "ms": ms, "x_cudnn_bench": med["cudnn-bench"] / ms})
    print(f"{'layer':16} {'candidate (the lowered convolution alone)':58} {'us':>9} {'x cuDNN':>8}")
    for r in rows_out:
        print(f"{r['layer']:16} {r['candidate'][:58]:58} {r['ms'] * 1e3:9.1f} {r['x_cudnn_bench']:8.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows_out}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
