"""A transformers Qwen3-MoE sparse block (router, top-k, experts; random weights) forward with its
experts computed by transformers' default ``"grouped_mm"`` function and by ``"autocutlass"``
(``autocutlass.swap_experts_``'s backend), timed side by side: issue 19's end-to-end case on the
real model code rather than ``moe_block_bench.py``'s hand-written block.

Default sizes: Qwen3-MoE-30B-A3B's layer (hidden 2048, expert intermediate 768, 128 experts, top 8)
at 4096 tokens. Both blocks share one set of weights; each has its own config naming its experts
implementation. Outputs are compared first (relative Frobenius error). Timing: ``search.timing``
protocol v1 (L2 flushed by writing), interleaved rounds, medians, paired ratio.
``AUTOCUTLASS_GROUPED_KERNELS=1`` lets our kernels serve the grouped GEMMs (else both run
``torch._grouped_mm`` and the ratio measures the wrapper); the miss policy is ``AUTOCUTLASS_POLICY``
(``cached`` unless set).

GPU machine: python benchmarks/probes/hf_moe_probe.py [--tokens 4096] [--json OUT]
CPU smoke run (tiny sizes, correctness only): python benchmarks/probes/hf_moe_probe.py --smoke
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
from typing import Any


def blocks(ns: argparse.Namespace) -> tuple[Any, Any]:
    """Two Qwen3-MoE sparse blocks sharing their weights: transformers' grouped_mm experts, ours."""
    import torch
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    from autocutlass.nn.experts import register_experts_backend

    cfg = Qwen3MoeConfig(hidden_size=ns.hidden, moe_intermediate_size=ns.inter, num_experts=ns.experts,
                         num_experts_per_tok=ns.topk, norm_topk_prob=True)  # fmt: skip
    theirs_cfg, ours_cfg = copy.deepcopy(cfg), copy.deepcopy(cfg)
    theirs_cfg._experts_implementation = "grouped_mm"
    ours_cfg._experts_implementation = register_experts_backend()
    torch.manual_seed(0)
    theirs = Qwen3MoeSparseMoeBlock(theirs_cfg)
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, p.shape[-1] ** -0.5)
    dt = torch.bfloat16 if ns.device == "cuda" else torch.float32
    theirs = theirs.to(ns.device, dt).eval()
    ours = Qwen3MoeSparseMoeBlock(ours_cfg).to(ns.device, dt).eval()
    ours.load_state_dict(theirs.state_dict(), assign=True)  # the very same tensors
    return theirs, ours


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from moe_block_bench import add_moe_args

    ap = argparse.ArgumentParser()
    add_moe_args(ap)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU, correctness only")
    ap.add_argument("--json")
    ns = ap.parse_args()
    if ns.smoke:
        ns.tokens, ns.experts, ns.topk, ns.hidden, ns.inter, ns.device = 64, 8, 2, 64, 32, "cpu"
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")
    import torch

    import autocutlass

    theirs, ours = blocks(ns)
    x = torch.randn(1, ns.tokens, ns.hidden, device=ns.device).to(next(theirs.parameters()).dtype)
    with torch.no_grad():
        y_theirs, y_ours = theirs(x), ours(x)
    y_theirs = y_theirs[0] if isinstance(y_theirs, tuple) else y_theirs
    y_ours = y_ours[0] if isinstance(y_ours, tuple) else y_ours
    ref = y_theirs.float()
    rel = float((y_ours.float() - ref).norm() / ref.norm().clamp_min(1e-30))
    row: dict[str, Any] = {"tokens": ns.tokens, "experts": ns.experts, "topk": ns.topk, "hidden": ns.hidden,
                           "inter": ns.inter, "rel_err": round(rel, 5),
                           "grouped_kernels": os.environ.get("AUTOCUTLASS_GROUPED_KERNELS", "0")}  # fmt: skip
    print(json.dumps(row), flush=True)
    if ns.device != "cuda":
        return 0 if rel < 1e-3 else 1

    from side_by_side import header, interleaved, paired_ratio, write_json

    from autocutlass.device import current_device

    dev = current_device()
    before = autocutlass.stats().as_dict()
    with torch.no_grad():
        per = interleaved({"ours": lambda: ours(x), "theirs": lambda: theirs(x)}, ns.rounds,
                          2 * (dev.l2_bytes or (64 << 20)))  # fmt: skip
    after = autocutlass.stats().as_dict()
    row.update({f"{k}_ms": round(statistics.median(v), 4) for k, v in per.items()})
    row["x_block"] = paired_ratio(per, "ours", "theirs")
    row["stats_delta"] = {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], int)}
    doc = {**header("transformers Qwen3-MoE sparse block: experts 'autocutlass' vs 'grouped_mm'", dev, ns.rounds),
           "policy": os.environ["AUTOCUTLASS_POLICY"], "row": row}  # fmt: skip
    write_json(ns.json, doc)
    print(f"Qwen3-MoE block {ns.tokens} tokens: ours {row['ours_ms']:.3f} ms, transformers grouped_mm "
          f"{row['theirs_ms']:.3f} ms, x{row['x_block']}; rel err {rel:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
