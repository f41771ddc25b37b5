"""Where a Llama training step's time goes, ours against torch: GPU kernel time by kernel, per step.

The model and step of ``llama_train_compile.py`` (Llama-3-8B layer sizes, ``--layers`` layers,
random init, bf16; forward + backward + AdamW at ``--batch`` x ``--seq``); ``ours`` has every
servable ``nn.Linear`` swapped (``autocutlass.swap_linear_``). After two warm-up steps each, one
step of each model runs under ``torch.profiler`` (CUDA activities); the kernels are summed by
name and put in classes: ``ours`` (CuTe DSL kernels: names with ``kernel_cutlass`` or from
``autocutlass``), ``cublas`` (nvjet / sm90_xmma / cutlass / gemm names not ours), ``other``. Printed:
the step's wall time, the summed kernel time per class, the kernel count, and the largest kernels
of each model; ``--json`` keeps it all.

GPU machine:  AUTOCUTLASS_POLICY=cached python benchmarks/probes/llama_train_profile.py --json OUT.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from collections import defaultdict
from typing import Any


def _class(name: str) -> str:
    low = name.lower()
    if "kernel_cutlass" in low or "autocutlass" in low or "cute" in low:
        return "ours"
    if any(k in low for k in ("nvjet", "xmma", "cutlass", "gemm", "cublas")):
        return "cublas"
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--top", type=int, default=25)
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")

    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import LlamaConfig, LlamaForCausalLM

    import autocutlass

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=ns.layers, vocab_size=128256, max_position_embeddings=8192)  # fmt: skip
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        ref = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    ours = autocutlass.swap_linear_(copy.deepcopy(ref))
    ids = torch.randint(0, 128256, (ns.batch, ns.seq), device="cuda")
    opts = {id(m): torch.optim.AdamW(m.parameters(), lr=1e-5) for m in (ref, ours)}

    def step(model: Any) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt = opts[id(model)]
        opt.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        opt.step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for _ in range(2):
        step(ours), step(ref)
    for name, model in (("torch", ref), ("ours", ours)):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            wall = step(model)
        per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        for ev in prof.events():
            if ev.device_type.name != "CUDA":
                continue
            us = float(getattr(ev, "device_time", 0.0) or getattr(ev, "cuda_time", 0.0) or 0.0)
            per[ev.name][0] += us
            per[ev.name][1] += 1
        classes: dict[str, float] = defaultdict(float)
        for k, (us, _) in per.items():
            classes[_class(k)] += us
        top = sorted(per.items(), key=lambda kv: -kv[1][0])[: ns.top]
        res[name] = {"wall_ms": wall, "kernel_ms": sum(v[0] for v in per.values()) / 1e3,
                     "kernels": int(sum(v[1] for v in per.values())),
                     "by_class_ms": {k: v / 1e3 for k, v in classes.items()},
                     "top": [{"name": k[:160], "ms": v[0] / 1e3, "count": v[1]} for k, v in top]}  # fmt: skip
        r = res[name]
        print(f"== {name}: wall {wall:.1f} ms, kernels {r['kernel_ms']:.1f} ms in {r['kernels']} launches; "
              + ", ".join(f"{k} {v:.1f} ms" for k, v in sorted(r["by_class_ms"].items())), flush=True)  # fmt: skip
        for t in r["top"]:
            print(f"   {t['ms']:8.2f} ms  x{t['count']:<4d} {t['name'][:110]}")
    res["stats"] = autocutlass.stats().as_dict()
    print(f"# stats {res['stats']}")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
