"""A mixture-of-experts block forward (issue 19's end-to-end case): router top-k, tokens sorted by
expert, the experts' gate and up projections as one grouped GEMM, SiLU-and-mul, the down
projection as a grouped GEMM, the weighted combine. The same block with ``torch._grouped_mm``
and with ``autocutlass.grouped_mm`` (everything else identical torch code), timed side by side.

Default sizes: Qwen3-MoE-30B-A3B's layer (hidden 2048, expert intermediate 768, 128 experts, top 8)
at 4096 tokens (32768 expert rows). Random bf16 weights and inputs; the router's top-k is
computed once (the timed forwards reuse the routing, so both sides do the same work). The two
outputs are compared first (relative Frobenius error). Timing: ``search.timing`` protocol v1 (L2
flushed by writing), interleaved rounds, medians. The grouped-GEMM share of the block is timed
too (the two grouped GEMMs alone, each side).

``AUTOCUTLASS_GROUPED_KERNELS=1`` lets our kernels serve (else both sides run torch and the ratio is
about 1); the miss policy is ``AUTOCUTLASS_POLICY`` (``cached`` unless set: the shipped
databases' grouped records, nearest T bucket).

GPU machine: python benchmarks/probes/moe_block_bench.py [--tokens 4096] [--json OUT]
CPU smoke run of the script's logic (tiny sizes, no timing): --device cpu --smoke
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any


def build(torch: Any, ns: argparse.Namespace) -> dict[str, Any]:
    """Weights, input and the routing (computed once)."""
    gen = torch.Generator(device=ns.device).manual_seed(0)
    dt = torch.bfloat16 if ns.device == "cuda" else torch.float32

    def rnd(*shape: int, scale: float) -> Any:
        return (torch.randn(*shape, generator=gen, device=ns.device) * scale).to(dt)

    e, h, i = ns.experts, ns.hidden, ns.inter
    x = rnd(ns.tokens, h, scale=1.0)
    router = rnd(e, h, scale=h**-0.5)
    w_gate_up = rnd(e, 2 * i, h, scale=h**-0.5)  # (E, N, K): the kernel reads its transpose's K-major rows
    w_down = rnd(e, h, i, scale=i**-0.5)
    probs = torch.softmax(x.float() @ router.float().t(), dim=-1)
    weights, experts = torch.topk(probs, ns.topk, dim=-1)  # (tokens, k)
    weights = (weights / weights.sum(-1, keepdim=True)).to(dt)
    flat = experts.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token_of_row = order // ns.topk  # the token of each sorted expert row
    counts = torch.bincount(flat, minlength=e)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    return {"x": x, "w_gate_up": w_gate_up, "w_down": w_down, "token_of_row": token_of_row,
            "row_weight": weights.reshape(-1)[order].unsqueeze(1), "offs": offs, "inter": i}  # fmt: skip


def block(torch: Any, gm: Any, t: dict[str, Any]) -> Any:
    """The block's forward from the routing on, with grouped GEMM ``gm``."""
    xs = t["x"].index_select(0, t["token_of_row"])  # (rows, hidden), sorted by expert
    h = gm(xs, t["w_gate_up"].transpose(-2, -1), t["offs"])  # (rows, 2 * inter)
    i = t["inter"]
    a = torch.nn.functional.silu(h[:, :i]) * h[:, i:]
    y = gm(a, t["w_down"].transpose(-2, -1), t["offs"])  # (rows, hidden)
    out = torch.zeros_like(t["x"])
    return out.index_add_(0, t["token_of_row"], y * t["row_weight"])


def add_moe_args(ap: argparse.ArgumentParser) -> None:
    """The block's sizes (Qwen3-MoE-30B-A3B's layer at 4096 tokens by default) and timing rounds."""
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--inter", type=int, default=768)
    ap.add_argument("--rounds", type=int, default=7)


def main() -> int:
    ap = argparse.ArgumentParser()
    add_moe_args(ap)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, correctness only (any device)")
    ap.add_argument("--json")
    ns = ap.parse_args()
    if ns.smoke:
        ns.tokens, ns.experts, ns.topk, ns.hidden, ns.inter = 64, 8, 2, 64, 32
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")
    import torch

    import autocutlass

    t = build(torch, ns)
    ours = lambda: block(torch, autocutlass.grouped_mm, t)  # noqa: E731
    theirs = lambda: block(torch, torch._grouped_mm, t)  # noqa: E731
    with torch.no_grad():
        y_ours, y_torch = ours(), theirs()
    ref = y_torch.float()
    rel = float((y_ours.float() - ref).norm() / ref.norm().clamp_min(1e-30))
    row = {"tokens": ns.tokens, "experts": ns.experts, "topk": ns.topk, "hidden": ns.hidden, "inter": ns.inter,
           "rows": int(t["offs"][-1]), "rel_err": round(rel, 5), "grouped_kernels": os.environ.get("AUTOCUTLASS_GROUPED_KERNELS", "0")}  # fmt: skip
    print(json.dumps(row), flush=True)
    if ns.smoke or ns.device != "cuda":
        return 0 if rel < 1e-3 else 1

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from side_by_side import header, interleaved, paired_ratio, write_json

    from autocutlass.device import current_device

    dev = current_device()
    flush = 2 * (dev.l2_bytes or (64 << 20))
    i = t["inter"]
    xs = t["x"].index_select(0, t["token_of_row"])
    a = torch.randn(xs.shape[0], i, device="cuda").to(torch.bfloat16)

    def gemms(gm: Any) -> Any:
        return lambda: (gm(xs, t["w_gate_up"].transpose(-2, -1), t["offs"]), gm(a, t["w_down"].transpose(-2, -1), t["offs"]))

    before = autocutlass.stats().as_dict()
    with torch.no_grad():
        per = interleaved({"ours": ours, "torch": theirs, "ours_gemms": gemms(autocutlass.grouped_mm),
                           "torch_gemms": gemms(torch._grouped_mm)}, ns.rounds, flush)  # fmt: skip
    med = {k: round(statistics.median(v), 4) for k, v in per.items()}
    row.update({f"{k}_ms": v for k, v in med.items()})
    row["x_block"] = paired_ratio(per, "ours", "torch")
    row["x_gemms"] = paired_ratio(per, "ours_gemms", "torch_gemms")
    row["gemm_share_torch"] = round(med["torch_gemms"] / med["torch"], 3)
    after = autocutlass.stats().as_dict()
    row["stats_delta"] = {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], int)}
    doc = {**header("MoE block forward (Qwen3-MoE-sized by default): autocutlass.grouped_mm vs torch._grouped_mm",
                    dev, ns.rounds), "policy": os.environ["AUTOCUTLASS_POLICY"], "row": row}  # fmt: skip
    write_json(ns.json, doc)
    print(f"MoE block {ns.tokens} tokens x top{ns.topk} of {ns.experts} experts: ours {med['ours']:.3f} ms, torch "
          f"{med['torch']:.3f} ms, x{row['x_block']} (grouped GEMMs alone x{row['x_gemms']}, "
          f"{row['gemm_share_torch']:.0%} of torch's block); rel err {rel:.4f}; at {time.strftime('%H:%M:%S')}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
