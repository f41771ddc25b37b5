"""Probe: the hopper_conv family (implicit-GEMM conv2d fprop, im2col TMA) against cuDNN.

For a few fprop layers of the public conv suite (../shared/bench/shapes-conv.json), compiles a few
configs (the family's first seeds), verifies each against F.conv2d in float32 (NaN-poisoned
output), then times each verified config and F.conv2d (cudnn.benchmark on, channels_last) with
the timing protocol (``autocutlass.search.timing.time_callable``: L2 flushed before every call),
in interleaved rounds, and prints one table: median microseconds, TFLOP/s and the ratio to cuDNN
(> 1: ours faster). ``--sweep N`` also samples N other feasible configs of the family's space per
layer (compiled, verified, timed once each) and takes the fastest ``--configs`` of seeds and
samples into the interleaved rounds.

GPU machine, from the project root (about 2-3 minutes; kernels compile into a temporary cache):

    PYTHONUNBUFFERED=1 python benchmarks/probes/conv_probe.py [--layers NAME,NAME] [--configs N] [--rounds R]
        [--sweep N]   (--sweep 16 on six layers: about 4 minutes)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from autocutlass.kernels.hopper_conv import HopperConvFamily, check
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.gemm.problem import DType
from autocutlass.search.timing import time_callable

ROOT = Path(__file__).resolve().parents[2]
SHAPES = next(
    (p for p in (ROOT / "../shared/bench/shapes-conv.json", ROOT / "shared/bench/shapes-conv.json",
                 ROOT / "benchmarks/shapes-conv.json") if p.is_file()),
    None,
)  # fmt: skip
DEFAULT_LAYERS = ("rn50-l1-3x3", "rn50-l2-3x3-s2", "rn50-l3-3x3", "rn50-l4-3x3", "rn50-l3-1x1", "sd-640@32")
TORCH = {DType.BF16: torch.bfloat16, DType.FP16: torch.float16}

FALLBACK_CASES = [  # the suite's rows for these layers, should the file be missing
    {"name": "rn50-l1-3x3", "N": 32, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "stride": [1, 1],
     "pad": [1, 1], "dilation": [1, 1], "dtype": "bf16"},
    {"name": "rn50-l2-3x3-s2", "N": 32, "C": 128, "H": 56, "W": 56, "K": 128, "R": 3, "S": 3, "stride": [2, 2],
     "pad": [1, 1], "dilation": [1, 1], "dtype": "bf16"},
    {"name": "rn50-l3-3x3", "N": 32, "C": 256, "H": 14, "W": 14, "K": 256, "R": 3, "S": 3, "stride": [1, 1],
     "pad": [1, 1], "dilation": [1, 1], "dtype": "bf16"},
    {"name": "rn50-l4-3x3", "N": 32, "C": 512, "H": 7, "W": 7, "K": 512, "R": 3, "S": 3, "stride": [1, 1],
     "pad": [1, 1], "dilation": [1, 1], "dtype": "bf16"},
    {"name": "rn50-l3-1x1", "N": 32, "C": 1024, "H": 14, "W": 14, "K": 256, "R": 1, "S": 1, "stride": [1, 1],
     "pad": [0, 0], "dilation": [1, 1], "dtype": "bf16"},
    {"name": "sd-640@32", "N": 8, "C": 640, "H": 32, "W": 32, "K": 640, "R": 3, "S": 3, "stride": [1, 1],
     "pad": [1, 1], "dilation": [1, 1], "dtype": "bf16"},
]  # fmt: skip


def problem_of(case: dict) -> ConvProblem:
    dt = DType(case["dtype"])
    return ConvProblem(
        direction="fprop", n=case["N"], h=case["H"], w=case["W"], c=case["C"], k=case["K"], r=case["R"],
        s=case["S"], stride_h=case["stride"][0], stride_w=case["stride"][1], pad_h=case["pad"][0],
        pad_w=case["pad"][1], dil_h=case["dilation"][0], dil_w=case["dilation"][1], x_dtype=dt, w_dtype=dt, y_dtype=dt,
    )  # fmt: skip


def rel_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    if not bool(torch.isfinite(y).all()):
        return math.inf
    return float(torch.linalg.vector_norm(y.float() - ref) / max(float(torch.linalg.vector_norm(ref)), 1e-30))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=",".join(DEFAULT_LAYERS))
    ap.add_argument("--configs", type=int, default=3, help="seeds per layer")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    ap.add_argument("--tol", type=float, default=1e-2, help="relative Frobenius tolerance (bf16)")
    ap.add_argument("--sweep", type=int, default=0, help="also sample this many configs of the space per layer")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    cases = json.loads(SHAPES.read_text())["cases"] if SHAPES is not None else FALLBACK_CASES
    by_name = {c["name"]: c for c in cases}
    names = [n for n in args.layers.split(",") if n]
    props = torch.cuda.get_device_properties(0)
    flush = 2 * int(getattr(props, "L2_cache_size", 50 * 2**20))
    print(f"# {props.name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"shapes {SHAPES if SHAPES else 'built-in fallback'}")  # fmt: skip
    cache = Path(tempfile.mkdtemp(prefix="conv-probe-"))
    fam = HopperConvFamily(cache_dir=cache)
    rows: list[tuple[str, str, float | None, float, float]] = []
    t_start = time.time()
    for name in names:
        case = by_name.get(name)
        if case is None:
            print(f"{name}: not in the shapes file", flush=True)
            continue
        prob = problem_of(case)
        why = fam.supports(prob)
        if why:
            print(f"{name}: not served: {why}", flush=True)
            continue
        dt = TORCH[prob.x_dtype]
        cl = torch.channels_last
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(prob.n, prob.c, prob.h, prob.w, device="cuda", generator=gen).to(dt).to(memory_format=cl)
        w = (torch.randn(prob.k, prob.c, prob.r, prob.s, device="cuda", generator=gen)
             / math.sqrt(prob.c * prob.r * prob.s)).to(dt).to(memory_format=cl)  # fmt: skip
        y = torch.empty(prob.n, prob.k, prob.p, prob.q, device="cuda", dtype=dt).to(memory_format=cl)
        geom = {"stride": (prob.stride_h, prob.stride_w), "padding": (prob.pad_h, prob.pad_w),
                "dilation": (prob.dil_h, prob.dil_w)}  # fmt: skip
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            ref = F.conv2d(x.float(), w.float(), None, **geom)

        def cudnn_call(x=x, w=w, geom=geom) -> None:
            F.conv2d(x, w, None, **geom)

        candidates = list(fam.seeds(prob))[: args.configs]
        if args.sweep:
            feasible = [c for c in fam.space(prob) if check(c, prob) is None and c not in candidates]
            candidates += random.Random(name).sample(feasible, min(args.sweep, len(feasible)))
        timers: list[tuple[str, object]] = [("cudnn", cudnn_call)]
        for cfg in candidates:
            assert check(cfg, prob) is None
            t0 = time.time()
            try:
                runner = fam.compile(cfg, prob)
            except Exception as e:  # noqa: BLE001 - a probe reports and goes on
                print(f"{name} {cfg.short()}: compile failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            y.fill_(float("nan"))
            runner(x, w, y)
            torch.cuda.synchronize()
            err = rel_error(y, ref)
            print(f"{name} {cfg.short()}: compiled in {time.time() - t0:.1f}s, rel err {err:.2e}", flush=True)
            if not err < args.tol:
                rows.append((name, cfg.short(), None, math.nan, err))
                continue

            def ours(runner=runner, x=x, w=w, y=y) -> None:
                runner(x, w, y)

            timers.append((cfg.short(), ours))
        if args.sweep and len(timers) > args.configs + 1:
            once = sorted((time_callable(fn, flush_bytes=flush).median_ms, label, fn) for label, fn in timers[1:])  # type: ignore[arg-type]
            print(f"{name}: sweep, fastest first: " + "; ".join(f"{lab} {ms * 1e3:.1f}us" for ms, lab, _ in once[:6]))
            timers = timers[:1] + [(lab, fn) for _, lab, fn in once[: args.configs]]
        medians: dict[str, list[float]] = {label: [] for label, _ in timers}
        for r in range(args.rounds):
            order = timers if r % 2 == 0 else timers[::-1]
            for label, fn in order:
                medians[label].append(time_callable(fn, flush_bytes=flush).median_ms)  # type: ignore[arg-type]
        base = statistics.median(medians["cudnn"])
        rows.append((name, "cudnn (benchmark=True)", base, prob.flops / (base * 1e-3) / 1e12, 0.0))
        for label, _ in timers[1:]:
            ms = statistics.median(medians[label])
            rows.append((name, label, ms, prob.flops / (ms * 1e-3) / 1e12, base / ms))
        print(f"{name}: timed in {time.time() - t_start:.0f}s so far", flush=True)

    print()
    print(f"{'layer':16s} {'kernel':36s} {'us':>9s} {'TFLOP/s':>8s} {'x cudnn':>8s}")
    for name, label, ms, tflops, ratio in rows:
        if ms is None:
            print(f"{name:16s} {label:36s} {'WRONG':>9s} {'':>8s} rel err {ratio:.2e}")
            continue
        tail = "" if label.startswith("cudnn") else f"{ratio:8.3f}"
        print(f"{name:16s} {label:36s} {ms * 1e3:9.1f} {tflops:8.1f} {tail:>8s}")
    print(f"# total {time.time() - t_start:.0f}s; kernel cache {cache}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
