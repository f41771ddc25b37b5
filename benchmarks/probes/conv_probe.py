"""Probe: the hopper_conv family (implicit-GEMM conv2d fprop, im2col TMA) against cuDNN.

For a few fprop layers of the public conv suite (../shared/bench/shapes-conv.json), compiles a few
configs (the family's first seeds), verifies each against F.conv2d in float32 (NaN-poisoned
output), then times each verified config and F.conv2d (cudnn.benchmark on, channels_last) with
the timing protocol (``autocutlass.search.timing.time_callable``: L2 flushed before every call),
in interleaved rounds, and prints one table: median microseconds, TFLOP/s and the ratio to cuDNN
(> 1: ours faster). ``--sweep N`` also samples N other feasible configs of the family's space per
layer (compiled, verified, timed once each) and takes the fastest ``--configs`` of seeds and
samples into the interleaved rounds. ``--stream-k`` adds stream-K configs (the cooperative 128x256,
256x128 and 128x128 tiles, with and without a 2-CTA cluster), each also run twice for the same bits; ``--records DB.sqlite`` adds the
database's ``hopper_conv`` record of each layer (labelled ``record``); ``--shapes`` names other
shapes files (comma-separated; the layers are looked up in all of them); ``--json`` writes the rows
(and, with a sweep or grid, every candidate's single timing). ``--grid few|narrow|large`` adds a
structured grid of the space (``grid_configs``: tiles x clusters x K splits for few-tile layers, the
same over 64-column tiles, tiles x clusters x schedules x rasters for large ones), and ``--workers N``
compiles every candidate first in N GPU-blind processes (into the probe's kernel cache).

GPU machine, from the project root (about 2-3 minutes; kernels compile into a temporary cache):

    PYTHONUNBUFFERED=1 python benchmarks/probes/conv_probe.py [--layers NAME,NAME] [--configs N] [--rounds R]
        [--sweep N]   (--sweep 16 on six layers: about 4 minutes)
"""

from __future__ import annotations

import argparse
import itertools
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

from autocutlass.kernels.hopper_conv import HopperConvConfig, HopperConvFamily, check
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
    ap.add_argument("--stream-k", action="store_true", help="add stream-K configs (checked for the same bits twice)")
    ap.add_argument("--records", help="a tuning database file: add its hopper_conv record of each layer")
    ap.add_argument("--shapes", help="shapes files to look the layers up in (comma-separated)")
    ap.add_argument("--json", help="write the table's rows here")
    ap.add_argument("--grid", choices=("few", "narrow", "large"), help="add this structured grid of the space per layer")
    ap.add_argument("--workers", type=int, default=0, help="compile the candidates first in N processes")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    cases = json.loads(SHAPES.read_text())["cases"] if SHAPES is not None else FALLBACK_CASES
    for extra in (args.shapes or "").split(","):
        if extra:
            cases = cases + json.loads(Path(extra).read_text())["cases"]
    by_name = {c["name"]: c for c in cases}
    names = [n for n in args.layers.split(",") if n]
    props = torch.cuda.get_device_properties(0)
    flush = 2 * int(getattr(props, "L2_cache_size", 50 * 2**20))
    print(f"# {props.name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"shapes {SHAPES if SHAPES else 'built-in fallback'}")  # fmt: skip
    cache = Path(tempfile.mkdtemp(prefix="conv-probe-")) / "kernels"
    fam = HopperConvFamily(cache_dir=cache)
    rows: list[tuple[str, str, float | None, float, float]] = []
    sweeps: list[dict[str, object]] = []
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
        labels: dict[HopperConvConfig, str] = {}
        if args.records:
            record = record_of(args.records, prob)
            if record is not None:
                candidates = [c for c in candidates if c != record] + [record]
                labels[record] = "record " + record.short()
        if args.stream_k:
            candidates += [c for c in stream_configs(prob) if c not in candidates]
        if args.sweep:
            feasible = [c for c in fam.space(prob) if check(c, prob) is None and c not in candidates]
            candidates += random.Random(name).sample(feasible, min(args.sweep, len(feasible)))
        if args.grid:
            candidates += [c for c in grid_configs(prob, args.grid) if c not in candidates]
        if args.workers > 1:
            t0 = time.time()
            failed = precompile(candidates, prob, cache, args.workers)
            print(f"{name}: {len(candidates)} configs compiled in {time.time() - t0:.0f}s by {args.workers} "
                  f"processes ({len(failed)} failed)", flush=True)  # fmt: skip
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
            same = ""
            if cfg.stream_k or cfg.split_k > 1:  # the split sums run in a fixed order: same bits again
                first = y.clone()
                y.fill_(float("nan"))
                runner(x, w, y)
                torch.cuda.synchronize()
                same = f", same bits {bool(torch.equal(first.view(torch.int16), y.view(torch.int16)))}"
            label = labels.get(cfg, cfg.short())
            print(f"{name} {label}: compiled in {time.time() - t0:.1f}s, rel err {err:.2e}{same}", flush=True)
            if not err < args.tol or same.endswith("False"):
                rows.append((name, label, None, math.nan, err))
                continue

            def ours(runner=runner, x=x, w=w, y=y) -> None:
                runner(x, w, y)

            timers.append((label, ours))
        if (args.sweep or args.grid) and len(timers) > args.configs + 1:
            once = sorted((time_callable(fn, flush_bytes=flush).median_ms, label, fn) for label, fn in timers[1:])  # type: ignore[arg-type]
            print(f"{name}: sweep, fastest first: " + "; ".join(f"{lab} {ms * 1e3:.1f}us" for ms, lab, _ in once[:6]))
            sweeps.extend({"layer": name, "kernel": lab, "us": ms * 1e3} for ms, lab, _ in once)
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
    if args.json:
        Path(args.json).write_text(json.dumps({
            "device": props.name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "rows": [{"layer": n, "kernel": lab, "us": None if ms is None else ms * 1e3, "tflops": tf,
                      "x_cudnn": r if ms is not None else None} for n, lab, ms, tf, r in rows],
            "sweep": sweeps,
        }, indent=1))  # fmt: skip
    return 0


def record_of(path: str, prob: ConvProblem) -> HopperConvConfig | None:
    """The ``hopper_conv`` record of ``prob`` in the tuning database file ``path`` (any GPU's)."""
    import sqlite3

    with sqlite3.connect(path) as db:
        row = db.execute(
            "select b.config from best b join problems p on p.id = b.problem_id where p.key = ? and b.family = ?",
            (prob.key(), "hopper_conv"),
        ).fetchone()
    return None if row is None else HopperConvConfig.from_dict(json.loads(row[0]))


def grid_configs(prob: ConvProblem, kind: str) -> list[HopperConvConfig]:
    """A structured grid of the family's feasible configs. 'few' (layers of few output tiles): the
    cooperative tiles of 64-256 rows x 128-256 columns, every cluster shape, data-parallel or split
    2-4 ways or the wave-filling count (``layer_splits``), serially or through the workspace; the
    ping-pong tiles data-parallel. 'narrow': the same over tiles of 64 columns. 'large': tiles x
    clusters x schedules x rasters, swizzle 1 and 8."""
    from autocutlass.kernels.hopper_conv import layer_splits
    from autocutlass.kernels.hopper_gemm.config import Raster, Schedule, SplitMode

    c = HopperConvConfig
    clusters = ((1, 1), (2, 1), (1, 2), (2, 2))
    out: list[HopperConvConfig] = []
    if kind in ("few", "narrow"):
        tiles = ((64, 128, 128), (64, 256, 64), (128, 128, 64), (128, 128, 128), (128, 256, 64), (256, 128, 64))
        if kind == "narrow":  # 64-column tiles: two 64x64 consumer warpgroups in a 128-row tile
            tiles = ((128, 64, 64), (128, 64, 128), (256, 64, 64), (64, 64, 64), (64, 64, 128))
        for (tm, tn, tk), (cm, cn) in itertools.product(tiles, clusters):
            out.append(c(tm, tn, tk, cm, cn))
            out.append(c(tm, tn, tk, cm, cn, raster=Raster.ALONG_N))
            out.append(c(tm, tn, tk, cm, cn, schedule=Schedule.PINGPONG))
            for sk in layer_splits(prob, tm, tn, tk):
                for mode in SplitMode:
                    out.append(c(tm, tn, tk, cm, cn, split_k=sk, split_mode=mode))
    else:
        tiles = ((128, 128, 64), (128, 192, 64), (128, 256, 64), (256, 128, 64), (64, 256, 64))
        for (tm, tn, tk), (cm, cn), sch, ras, sw in itertools.product(
            tiles, clusters, tuple(Schedule), tuple(Raster), (1, 8)
        ):
            out.append(c(tm, tn, tk, cm, cn, schedule=sch, raster=ras, swizzle=sw))
    return [cfg for cfg in dict.fromkeys(out) if check(cfg, prob) is None]


def precompile(configs: list[HopperConvConfig], prob: ConvProblem, cache: Path, workers: int) -> list[str]:
    """Compile ``configs`` for ``prob`` into the kernel cache ``cache`` (``AUTOCUTLASS_CACHE_DIR``'s
    kernels/) in ``workers`` GPU-blind processes, the pool of ``autocutlass kernels compile``; the
    labels of those that failed."""
    from types import SimpleNamespace

    from autocutlass.cli.kernels import _compile_pool

    assert cache.name == "kernels", cache
    os.environ["AUTOCUTLASS_CACHE_DIR"] = str(cache.parent)  # the spawned workers' kernel cache
    failed: list[str] = []
    ns = SimpleNamespace(workers=workers, arch="sm_90a", family="hopper_conv")
    for label, err in _compile_pool(ns, HopperConvFamily(), configs, prob):
        if err is not None:
            failed.append(label)
            print(f"compile failed: {label}: {err[:200]}", flush=True)
    return failed


def stream_configs(prob: ConvProblem) -> list[HopperConvConfig]:
    """Stream-K configs to time: the big cooperative tiles with and without a 2-CTA cluster (those
    the layer's check accepts). (Session 32's call a also timed the cost model's pick, the
    cheapest of ``waves.predicted_cost(..., stream_k=True)`` among tiles of at least 128x128 outputs.)"""
    c = HopperConvConfig
    out = [c(128, 256, 64, stream_k=True), c(128, 256, 64, cluster_m=2, stream_k=True),
            c(256, 128, 64, stream_k=True), c(256, 128, 64, cluster_n=2, stream_k=True),
            c(128, 128, 64, stream_k=True), c(128, 128, 64, cluster_n=2, stream_k=True)]  # fmt: skip
    return [cfg for cfg in dict.fromkeys(out) if check(cfg, prob) is None]


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
