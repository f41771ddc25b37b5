"""Is PyTorch's cuDNN default mode measured as a user meets it? Four ways of timing the same layers.

PyTorch keeps the cuDNN execution plan it picked for a convolution in a ``thread_local`` cache
(``benchmark_cache`` in ``aten/src/ATen/native/cudnn/Conv_v8.cpp``) whose key leaves
``cudnn.benchmark`` out. This probe times each layer (fprop, dgrad or wgrad; channels_last bf16,
random data; ``search.timing`` protocol v1, L2 flushed by writing, medians of rounds):

- ``fresh_default``: a fresh process with ``cudnn.benchmark = False`` (what a user's process gets);
- ``fresh_benchmark``: a fresh process with ``cudnn.benchmark = True``;
- ``same_thread_default``: this process, default mode on the thread that ran benchmark mode first
  (``autocutlass bench`` up to session 41);
- ``own_thread_default``: this process, default mode on a fresh thread (``bench.measure.OwnThread``,
  session 42 on).

If ``own_thread_default`` matches ``fresh_default`` and ``same_thread_default`` matches
``fresh_benchmark``, the bench's old "default mode" column was benchmark mode, and the new one is the
user's default mode.

GPU machine: python benchmarks/probes/cudnn_plan_cache.py --json OUT.json [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# (name, direction, N, C, H, W, K, R): 3x3 layers pad 1 stride 1; the anchors' (../shared/bench/anchors-conv-*)
# layers where the heuristic lost to benchmark mode on an H100, and a few where it did not
LAYERS = [
    ("rn50-l3-3x3-b128/dgrad", "dgrad", 128, 256, 14, 14, 256, 3),
    ("sdxl-1280@32/wgrad", "wgrad", 2, 1280, 32, 32, 1280, 3),
    ("rn50-l3-3x3-b128/fprop", "fprop", 128, 256, 14, 14, 256, 3),
    ("sd-640@32/dgrad", "dgrad", 8, 640, 32, 32, 640, 3),
    ("sd-640@32/wgrad", "wgrad", 8, 640, 32, 32, 640, 3),
    ("vae-512@128/wgrad", "wgrad", 4, 512, 128, 128, 512, 3),
    ("rn50-l3-1x1/wgrad", "wgrad", 32, 1024, 14, 14, 256, 1),
]


def _call(layer: tuple[Any, ...]) -> Any:
    import torch
    import torch.nn.functional as F

    _, direction, n, c, h, w, k, r = layer
    pad = r // 2
    g = torch.Generator(device="cuda").manual_seed(0)
    cl = torch.channels_last
    x = torch.randn(n, c, h, w, device="cuda", generator=g).to(torch.bfloat16).contiguous(memory_format=cl)
    wt = (torch.randn(k, c, r, r, device="cuda", generator=g) * 0.05).to(torch.bfloat16).contiguous(memory_format=cl)
    dy = torch.randn(n, k, h, w, device="cuda", generator=g).to(torch.bfloat16).contiguous(memory_format=cl)
    if direction == "fprop":
        return lambda: F.conv2d(x, wt, None, 1, pad)
    mask = [direction == "dgrad", direction == "wgrad", False]
    return lambda: torch.ops.aten.convolution_backward(dy, x, wt, None, [1, 1], [pad, pad], [1, 1], False, [0, 0],
                                                       1, mask)  # fmt: skip


def _time(fn: Any, rounds: int) -> float:
    import torch

    from autocutlass.search.timing import time_callable

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return statistics.median(time_callable(fn, flush_bytes=2 * l2).median_ms for _ in range(rounds))


def child(mode: str, rounds: int) -> dict[str, float]:
    """A fresh process: every layer timed in one mode."""
    import torch

    torch.backends.cudnn.benchmark = mode == "benchmark"
    return {layer[0]: _time(_call(layer), rounds) for layer in LAYERS}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", choices=["default", "benchmark"])
    ns = ap.parse_args()
    if ns.child:
        print(json.dumps(child(ns.child, ns.rounds)))
        return 0
    import torch

    fresh = {}
    for mode in ("default", "benchmark"):
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--rounds", str(ns.rounds)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        fresh[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    same, own = {}, {}
    for layer in LAYERS:
        fn = _call(layer)
        cudnn = torch.backends.cudnn

        def bench_mode(fn: Any = fn) -> object:
            cudnn.benchmark = True
            return fn()

        def default_mode(fn: Any = fn) -> object:
            cudnn.benchmark = False
            return fn()

        _time(bench_mode, 1)  # benchmark mode first on this thread: its plan is cached here
        same[layer[0]] = _time(default_mode, ns.rounds)
        with ThreadPoolExecutor(1) as pool:  # a fresh thread: an empty plan cache
            own[layer[0]] = pool.submit(_time, default_mode, ns.rounds).result()
    cudnn.benchmark = False
    rows = []
    print(f"{'layer':24} {'GFLOP':>7} {'fresh default':>14} {'fresh bench':>12} {'same thread':>12} {'own thread':>11}"
          "  (TFLOP/s)")  # fmt: skip
    for layer in LAYERS:
        name, _, n, c, h, w, k, r = layer
        gflop = 2 * n * h * w * k * c * r * r / 1e9
        ms = {"fresh_default": fresh["default"][name], "fresh_benchmark": fresh["benchmark"][name],
              "same_thread_default": same[name], "own_thread_default": own[name]}  # fmt: skip
        rows.append({"layer": name, "gflop": gflop, "ms": ms})
        tf = {m: gflop / v for m, v in ms.items()}
        print(f"{name:24} {gflop:7.1f} {tf['fresh_default']:14.1f} {tf['fresh_benchmark']:12.1f} "
              f"{tf['same_thread_default']:12.1f} {tf['own_thread_default']:11.1f}")  # fmt: skip
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "thread": threading.current_thread().name, "rounds": ns.rounds, "rows": rows}  # fmt: skip
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
