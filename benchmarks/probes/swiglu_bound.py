"""What fusing SwiGLU can gain at most (no GPU): a roofline bound on issue 21's "fused SwiGLU MLP >=
1.15x torch's unfused sequence in prefill".

torch's unfused MLP, ``down(silu(x @ Wg^T) * (x @ Wu^T))``, runs three GEMMs and two elementwise
passes: ``silu`` reads and writes an (M, I) tensor, the product reads two and writes one. The fused
path (``linear(x, cat([Wg, Wu]), activation="swiglu")`` then ``down``) runs the same GEMM FLOPs with
no elementwise pass, and its first GEMM writes (M, I) instead of the two (M, I) outputs of the gate
and up GEMMs. So at GEMM parity the fused MLP saves at most the elementwise passes' bytes at the copy
bandwidth plus one (M, I) write, and

    bound = (t_gemm + t_elementwise) / (t_gemm - t_saved_write)

with every GEMM at ``--tflops`` and every byte at ``--tbps``. Both are optimistic for torch (its
elementwise kernels reach less than the copy roof, its GEMMs no more than our peak), so the bound
is an upper bound on what the fusion itself buys; a larger measured ratio needs GEMMs faster than
cuBLAS's. Reads nothing, writes JSON with ``--json``.

    python benchmarks/probes/swiglu_bound.py [--tflops 700] [--tbps 3.0] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys

MODELS = {"llama3-8b": (4096, 14336), "llama3-70b": (8192, 28672)}
TOKENS = (512, 2048, 8192, 16384)
BYTES = 2  # bf16


def bound(m: int, hidden: int, inter: int, tflops: float, tbps: float) -> dict[str, float]:
    flops = 2 * m * hidden * (2 * inter) + 2 * m * inter * hidden  # gate + up, down
    t_gemm = flops / (tflops * 1e12)
    mi = m * inter * BYTES
    elementwise = (mi + mi) + (2 * mi + mi)  # silu: read + write; product: read two, write one
    t_elem = elementwise / (tbps * 1e12)
    t_write = mi / (tbps * 1e12)  # the up GEMM's output the fused GEMM never writes
    torch_s = t_gemm + t_elem
    fused_s = t_gemm - t_write
    return {"tokens": m, "hidden": hidden, "intermediate": inter, "gemm_ms": t_gemm * 1e3,
            "elementwise_ms": t_elem * 1e3, "torch_ms": torch_s * 1e3, "fused_ms": fused_s * 1e3,
            "bound_x": torch_s / fused_s}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tflops", type=float, default=700.0, help="bf16 GEMM rate of both sides (TFLOP/s)")
    ap.add_argument("--tbps", type=float, default=3.0, help="copy bandwidth (TB/s): 3.0 H100, 4.2 H200")
    ap.add_argument("--json")
    ns = ap.parse_args()
    rows = [bound(m, h, i, ns.tflops, ns.tbps) for name, (h, i) in MODELS.items() for m in TOKENS]
    for (name, _), r in zip([(n, m) for n in MODELS for m in TOKENS], rows, strict=True):
        print(f"{name:11s} M={r['tokens']:6d}  GEMMs {r['gemm_ms']:7.3f} ms  elementwise {r['elementwise_ms']:6.3f} ms"
              f"  torch {r['torch_ms']:7.3f}  fused {r['fused_ms']:7.3f}  bound x{r['bound_x']:.3f}")  # fmt: skip
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"what": "upper bound of a fused SwiGLU MLP over torch's unfused sequence at GEMM parity",
                       "tflops": ns.tflops, "tbps": ns.tbps, "rows": rows}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
