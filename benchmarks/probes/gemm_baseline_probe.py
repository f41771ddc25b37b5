"""Why does the tuner's torch time differ from the bench's? torch.matmul timed several ways, one process.

Sessions 41 and 42 tuned 4608x1152x4096 (bf16, row/col) on H100s. The tuner's finals timed torch.matmul at
641 and 673 TFLOP/s, and ``autocutlass bench`` timed it at 699 and 716, while our kernel read 687-690 in
both. This probe times torch.matmul on the same shapes, interleaved rounds, medians (``search.timing``
protocol v1):

- ``bench``: ``torch.matmul(a, b, out=d_fresh)``, what ``autocutlass bench`` times;
- ``ieee``: the same under ``fp32_matmul_precision("ieee")``, the tuner's baseline context for bf16;
- ``guarded``: ``out=`` the tuner's guarded NaN output (a view 4 KiB into a larger buffer);
- ``handler``: the tuner's own baseline request (``search.handlers.BenchHandler``) in this process;
- ``child``: that request in a fresh process, as a tuning worker runs it.

GPU machine: python benchmarks/probes/gemm_baseline_probe.py --json OUT.json [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any

SHAPES = [(4608, 1152, 4096), (1300, 4096, 4096), (3100, 4096, 8192), (8192, 4096, 4096)]


def _problem(m: int, n: int, k: int) -> Any:
    from autocutlass.ops.gemm.problem import GemmProblem
    from autocutlass.ops.types import Major

    return GemmProblem(m=m, n=n, k=k, a_major=Major.ROW, b_major=Major.COL)


def _handler_ms(problem: Any) -> float:
    from autocutlass.search.handlers import BenchHandler

    out = BenchHandler()({"op": "bench", "problem": problem.as_dict(), "config": None, "family": "hopper_gemm"})
    return float(out["timing"]["median_ms"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", help="M,N,K: one handler timing in this fresh process")
    ns = ap.parse_args()
    if ns.child:
        m, n, k = (int(v) for v in ns.child.split(","))
        print(json.dumps(_handler_ms(_problem(m, n, k))))
        return 0
    import torch

    from autocutlass.ops.gemm.evaluation import fp32_matmul_precision, make_inputs
    from autocutlass.search.handlers import interleaved_rounds
    from autocutlass.search.timing import time_callable

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for m, n, k in SHAPES:
        p = _problem(m, n, k)
        x = make_inputs(p, device="cuda", seed=0)
        a, b, d = x.a, x.b, x.d
        fresh = torch.empty_like(d)

        def plain(out: Any = fresh) -> object:
            return torch.matmul(a, b, out=out)

        def ieee() -> object:
            with fp32_matmul_precision("ieee"):
                return torch.matmul(a, b, out=fresh)

        timers = {"bench": lambda: time_callable(plain, flush_bytes=2 * l2).median_ms,
                  "ieee": lambda: time_callable(ieee, flush_bytes=2 * l2).median_ms,
                  "guarded": lambda: time_callable(lambda: plain(d), flush_bytes=2 * l2).median_ms,
                  "handler": lambda p=p: _handler_ms(p)}  # fmt: skip
        rounds = interleaved_rounds(list(timers.values()), ns.rounds)  # order reversed every other round
        ms: dict[str, list[float]] = {name: list(v or []) for name, v in zip(timers, rounds, strict=True)}
        child = subprocess.run([sys.executable, __file__, "--child", f"{m},{n},{k}"], capture_output=True, text=True,
                               check=True)  # fmt: skip
        ms["child"] = [json.loads(child.stdout.strip().splitlines()[-1])]
        tf = {name: 2 * m * n * k / statistics.median(v) / 1e9 for name, v in ms.items()}
        rows.append({"shape": [m, n, k], "ms": ms, "tflops": tf})
        print(f"{m}x{n}x{k}: " + ", ".join(f"{name} {v:.1f}" for name, v in tf.items()) + " TFLOP/s")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
