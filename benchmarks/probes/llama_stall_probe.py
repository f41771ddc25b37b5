"""Probe: how long a Llama model stalls on its first calls from an empty user database, and how
fast it runs once its GEMMs are tuned (issue 20's model benchmark).

The model: ``LlamaForCausalLM`` with Llama-3-8B's layer sizes (hidden 4096, intermediate 14336, 32
heads, 8 KV heads, vocabulary 128256), ``--layers`` layers (2), random init, bf16, eager (no
``torch.compile``), every servable ``nn.Linear`` swapped (``autocutlass.swap_linear_``); torch's
copy of the same weights is the reference.

For each policy of ``--policies`` a fresh process (clean imports) starts with an **empty user
database** (``AUTOCUTLASS_DB`` in a temporary directory), the shipped databases off unless
``--shipped``, and an empty kernel cache unless ``--warm-kernel-cache``. It runs, in order, the
first prefill (batch 1 x ``--seq``) and the first forward of each decode batch of
``--decode-batches`` (one token each, no KV cache: the decode GEMMs' shapes, M = batch). Per phase:

* ``first_s``: wall time of the first forward, synchronised: the caller's stall (``tune``: the
  tunings of the phase's new GEMM shapes; ``background``: stand-ins, torch while no kernel of the
  class is loaded);
* ``tuned_s``: until the background tuner went idle (``tune``: = ``first_s``);
* ``swap_s``: the next forward, the first to run the winners (``background``: it looks the
  problems up again and loads their kernels, a second, short stall).

``total_stall_s`` sums ``first_s + swap_s`` over the phases (issue 20's target: <= 30 s). Then the
steady state: each phase's forward, ours and torch, in ``--rounds`` interleaved rounds of
``--reps`` forwards timed with CUDA events, medians, ``ratio`` = torch / ours (target >= 1.0), and
``paired_ratio``, the median of the rounds' own torch / ours (each round times both back to back,
so a drift of the host's speed between rounds cancels).

GPU machine (transformers installed there):
    python benchmarks/probes/llama_stall_probe.py [--policies background,tune] [--shipped] [--gated-mlp] [--qkv]
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def phases(seq: int, decode_batches: str) -> list[tuple[str, int, int]]:
    """(name, batch, tokens): the first prefill, then one decode step per batch size."""
    return [("prefill", 1, seq)] + [(f"decode{b}", int(b), 1) for b in decode_batches.split(",") if b]


def run_child(ns: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import autocutlass
    from autocutlass.api import dispatcher

    import_s = time.perf_counter() - t0
    bf = torch.bfloat16
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=ns.layers, vocab_size=ns.vocab, max_position_embeddings=max(8192, ns.seq))  # fmt: skip
    torch.manual_seed(0)
    torch.set_default_dtype(bf)
    with torch.device("cuda"):
        ref = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    ref = ref.to(bf).eval()
    ours = autocutlass.swap_linear_(copy.deepcopy(ref)).eval()
    if ns.gated_mlp:  # the MLPs' act(gate) * up in the gate GEMM's epilogue (AUTOCUTLASS_GATED_KERNELS=1)
        ours = autocutlass.swap_gated_mlp_(ours)
    if ns.qkv:  # each attention's q/k/v projections as one packed GEMM
        ours = autocutlass.swap_qkv_(ours)
    d = dispatcher()
    gen = torch.Generator(device="cuda").manual_seed(1)
    inputs = {name: torch.randint(0, ns.vocab, (b, t), device="cuda", generator=gen) for name, b, t in phases(ns.seq, ns.decode_batches)}

    def fwd(model: Any, ids: Any) -> Any:
        return model(input_ids=ids, use_cache=False).logits

    rows: list[dict[str, Any]] = []
    with torch.no_grad():
        fwd(ref, inputs["prefill"][:, :16])  # torch's own first-call costs (cuBLAS handles, SDPA) out of the stall
        torch.cuda.synchronize()
        for name, ids in inputs.items():
            before = autocutlass.stats().as_dict()
            t1 = time.perf_counter()
            fwd(ours, ids)
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t1
            idle = d.wait_background(ns.tune_timeout)
            tuned_s = time.perf_counter() - t1
            t2 = time.perf_counter()
            out = fwd(ours, ids)
            torch.cuda.synchronize()
            swap_s = time.perf_counter() - t2
            want = fwd(ref, ids)
            err = float((out.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30))
            after = autocutlass.stats().as_dict()
            row = {"phase": name, "shape": list(ids.shape), "first_s": round(first_s, 3), "tuned_s": round(tuned_s, 3),
                   "swap_s": round(swap_s, 3), "background_idle": idle, "logits_rel_err": err,
                   "stats": {k: after[k] - before[k] for k in after if after[k] != before[k]}}  # fmt: skip
            rows.append(row)
            log(f"{ns.policy}: {name}: stall {first_s:.2f} s, tuned after {tuned_s:.2f} s, swap call {swap_s:.2f} s, "
                f"logits rel err {err:.4f}, {row['stats']}")  # fmt: skip
        for row in rows:
            ids = inputs[row["phase"]]
            times: dict[str, list[float]] = {"ours": [], "torch": []}
            for r in range(ns.rounds):
                order = [("ours", ours), ("torch", ref)]
                for who, model in order if r % 2 == 0 else order[::-1]:
                    fwd(model, ids)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(ns.reps):
                        fwd(model, ids)
                    end.record()
                    end.synchronize()
                    times[who].append(start.elapsed_time(end) / ns.reps)
            med = {k: statistics.median(v) for k, v in times.items()}
            paired = statistics.median(t / o for o, t in zip(times["ours"], times["torch"], strict=True))
            row.update(ms_ours=med["ours"], ms_torch=med["torch"], ratio=med["torch"] / med["ours"],
                       paired_ratio=paired, times_ms=times)  # fmt: skip
            log(f"{ns.policy}: {row['phase']}: ours {med['ours']:.3f} ms, torch {med['torch']:.3f} ms, "
                f"x{row['ratio']:.3f} (median of the rounds' ratios x{paired:.3f})")
    doc = {
        "policy": ns.policy, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "import_s": round(import_s, 3), "shipped": ns.shipped, "warm_kernel_cache": ns.warm_kernel_cache,
        "layers": ns.layers, "phases": rows,
        "total_stall_s": round(sum(r["first_s"] + r["swap_s"] for r in rows), 3),
        "total_tuned_s": round(sum(r["tuned_s"] for r in rows), 3),
        "geomean_ratio": math.exp(statistics.fmean(math.log(r["ratio"]) for r in rows)),
        "geomean_paired_ratio": math.exp(statistics.fmean(math.log(r["paired_ratio"]) for r in rows)),
        "stats": autocutlass.stats().as_dict(),
    }  # fmt: skip
    Path(ns.child_out).write_text(json.dumps(doc, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="background,tune")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--decode-batches", default="1,4,8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tune-timeout", type=float, default=400.0, help="longest wait for the background tunings")
    ap.add_argument("--shipped", action="store_true", help="keep the shipped databases (sibling records)")
    ap.add_argument("--warm-kernel-cache", action="store_true", help="keep the user's compiled-kernel cache")
    ap.add_argument("--gated-mlp", action="store_true",
                    help="also swap the MLPs (swap_gated_mlp_) and set AUTOCUTLASS_GATED_KERNELS=1")  # fmt: skip
    ap.add_argument("--qkv", action="store_true", help="also pack each attention's q/k/v projections (swap_qkv_)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--policy", default=None, help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child_out:
        return run_child(ns)
    docs = []
    for policy in ns.policies.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "AUTOCUTLASS_POLICY": policy, "AUTOCUTLASS_DB": f"{tmp}/user.sqlite"}
            if ns.gated_mlp:
                env["AUTOCUTLASS_GATED_KERNELS"] = "1"
            if not ns.shipped:
                env["AUTOCUTLASS_SHIPPED_DBS"] = "off"
            if not ns.warm_kernel_cache:
                env["AUTOCUTLASS_CACHE_DIR"] = f"{tmp}/kernels"
            args = [a for a in sys.argv[1:] if a != "--json" and not a.endswith(".json")]
            child = [sys.executable, __file__, *args, "--policy", policy, "--child-out", f"{tmp}/out.json"]
            log(f"policy {policy}: {' '.join(child[2:])}")
            rc = subprocess.call(child, env=env)
            if rc != 0 or not Path(f"{tmp}/out.json").exists():
                log(f"policy {policy}: child failed (rc {rc})")
                continue
            docs.append(json.loads(Path(f"{tmp}/out.json").read_text()))
            if ns.json:
                Path(ns.json).write_text(json.dumps({"runs": docs}, indent=1))
    print("| policy | total stall s | tuned s | " + " | ".join(r["phase"] for r in docs[0]["phases"]) + " | geomean |" if docs else "no run")
    for doc in docs:
        cells = [f"x{r['ratio']:.3f}/x{r['paired_ratio']:.3f} ({r['first_s']:.1f} s)" for r in doc["phases"]]
        print(f"| {doc['policy']} | {doc['total_stall_s']:.1f} | {doc['total_tuned_s']:.1f} | " + " | ".join(cells)
              + f" | x{doc['geomean_ratio']:.3f}/x{doc['geomean_paired_ratio']:.3f} |")  # fmt: skip
    return 0 if docs else 1


if __name__ == "__main__":
    sys.exit(main())
