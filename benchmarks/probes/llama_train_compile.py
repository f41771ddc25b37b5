"""A Llama-3-8B-shaped model on autocutlass, one line (``autocutlass.swap_linear_``): a training step
and compiled inference against the same model in torch.

The model: ``LlamaForCausalLM(LlamaConfig(...))`` with Llama-3-8B's layer sizes (hidden 4096,
intermediate 14336, 32 heads, 8 KV heads, vocabulary 128256), ``--layers`` layers (2), random
init, bf16, built on the GPU (no download). ``ours`` is a deep copy with every servable
``nn.Linear`` swapped (q, k, v, o, gate, up, down, lm_head), so both start from the same weights.

(a) **Training step** (forward + backward + AdamW), batch ``--batch`` x ``--seq`` (4 x 2048; on a
CUDA out-of-memory error it retries with batch 1, and says so): first the loss and every
parameter's gradient of one step, ours against torch (relative Frobenius error per parameter);
then the time per step, ``--rounds`` interleaved rounds (the order reversed every other round),
medians and their ratio.

(b) **Inference under ``torch.compile(mode="reduce-overhead")``** (CUDA graphs), both models
compiled the same way: prefill (batch 1 x ``--seq``, logits of every position) and decode
(batches ``--decode-batches``, one token each without a KV cache: the decode GEMMs' shapes,
M = batch; the batch dimension is marked dynamic). Graph breaks and cudagraph skips are counted
per model; replays are timed with CUDA events, interleaved, medians.

The miss policy comes from ``AUTOCUTLASS_POLICY`` (default here ``cached``: no tuning, a miss
serves the best stored record or the family's default config and is recorded for ``autocutlass
tune --pending``); the database is ``AUTOCUTLASS_DB`` plus the shipped layer. The warm-up step of
each part (not timed) compiles our kernels; the JSON records the policy, the database, the
dispatcher's counters (database hits, misses recorded, compiles, fallbacks) after each part.

GPU machine (transformers installed there):
    AUTOCUTLASS_POLICY=cached python benchmarks/probes/llama_train_compile.py --json OUT.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from typing import Any


def _rel(x: Any, ref: Any) -> float:
    ref = ref.float()
    return float((x.float() - ref).norm() / ref.norm().clamp_min(1e-30))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--decode-batches", default="2,4,8,1")
    ap.add_argument("--replays", type=int, default=10, help="replays per timed inference sample")
    ap.add_argument("--skip", choices=["train", "infer"], action="append", default=[])
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")

    import torch
    import transformers
    from torch._dynamo.utils import counters
    from transformers import LlamaConfig, LlamaForCausalLM

    import autocutlass
    from autocutlass import settings

    t_start = time.perf_counter()
    bf = torch.bfloat16
    s = settings.current()
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "policy": s.policy.value,
        "db": str(s.db_url),
        "shipped_dbs": str(s.shipped_dbs_dir),
        "config": {"hidden": 4096, "intermediate": 14336, "heads": 32, "kv_heads": 8, "layers": ns.layers,
                   "vocab": ns.vocab},
    }  # fmt: skip
    print(f"# {result['device']}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"policy {result['policy']}, db {result['db']}", flush=True)  # fmt: skip

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=ns.layers, vocab_size=ns.vocab, max_position_embeddings=max(8192, ns.seq))  # fmt: skip
    torch.manual_seed(0)
    torch.set_default_dtype(bf)
    with torch.device("cuda"):
        ref = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    ref = ref.to(bf)
    ours = autocutlass.swap_linear_(copy.deepcopy(ref))
    swapped = sum(type(m) is autocutlass.nn.Linear for m in ours.modules())
    result["swapped_linears"] = swapped
    print(f"# {swapped} nn.Linear swapped", flush=True)

    def stats() -> dict[str, int]:
        return autocutlass.stats().as_dict()

    def dump() -> None:  # after each part, so that a run cut short keeps what it measured
        result["stats"] = stats()
        result["wall_s"] = round(time.perf_counter() - t_start, 1)
        if ns.json:
            with open(ns.json, "w") as f:
                json.dump(result, f, indent=1)

    # ---- (a) training --------------------------------------------------------------------------
    if "train" not in ns.skip:
        batch, reduced = ns.batch, False
        while True:
            try:
                result["train"] = _train(torch, ref, ours, batch, ns.seq, ns.vocab, ns.rounds)
                break
            except torch.cuda.OutOfMemoryError:
                if batch == 1:
                    raise
                print(f"# out of memory at batch {batch} x {ns.seq}: retrying with batch 1", flush=True)
                for m in (ref, ours):
                    m.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                batch, reduced = 1, True
        result["train"]["batch_reduced_for_memory"] = reduced
        result["train"]["stats"] = stats()
        t = result["train"]
        print(f"train {t['batch']}x{ns.seq}: loss ours {t['loss_ours']:.5f} torch {t['loss_torch']:.5f}; "
              f"grad rel err max {t['grad_rel_err_max']:.4f} ({t['grad_rel_err_worst']}), "
              f"{'OK' if t['match'] else 'MISMATCH'}", flush=True)  # fmt: skip
        print(f"train step: ours {t['ms_ours']:.1f} ms, torch {t['ms_torch']:.1f} ms, x{t['ratio']:.3f} "
              f"(time_torch / time_ours)", flush=True)  # fmt: skip
        for m in (ref, ours):
            m.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        dump()

    # ---- (b) compiled inference ----------------------------------------------------------------
    if "infer" not in ns.skip:
        ref.eval()
        ours.eval()
        decode = [int(b) for b in ns.decode_batches.split(",") if b]
        result["infer"] = _infer(torch, counters, ref, ours, ns.seq, ns.vocab, decode, ns.rounds, ns.replays)
        result["infer_stats"] = stats()
        print("| case | ours ms | torch ms | x torch | graph breaks ours/torch | cudagraph skips ours/torch |")
        print("| --- | --- | --- | --- | --- | --- |")
        inf = result["infer"]
        for case in inf["cases"]:
            print(f"| {case['name']} | {case['ms_ours']:.3f} | {case['ms_torch']:.3f} | {case['ratio']:.3f} | "
                  f"{inf['graph_breaks']['ours']}/{inf['graph_breaks']['torch']} | "
                  f"{inf['cudagraph_skips']['ours']}/{inf['cudagraph_skips']['torch']} |")  # fmt: skip

    dump()
    print(f"# stats {result['stats']}; {result['wall_s']} s", flush=True)
    return 0


def _train(torch: Any, ref: Any, ours: Any, batch: int, seq: int, vocab: int, rounds: int) -> dict[str, Any]:
    gen = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), device="cuda", generator=gen)

    def loss_and_grads(model: Any) -> Any:
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        return loss.detach()

    loss_ours = loss_and_grads(ours)  # also the warm-up: our kernels compile here
    loss_torch = loss_and_grads(ref)
    errs = {name: _rel(p.grad, pr.grad) for (name, p), pr in zip(ours.named_parameters(), ref.parameters(), strict=True)}
    worst = max(errs, key=errs.get)  # type: ignore[arg-type]
    loss_err = abs(loss_ours.item() - loss_torch.item()) / abs(loss_torch.item())
    match = loss_err < 1e-2 and errs[worst] < 5e-2

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

    step(ours)  # warm-up: AdamW's state, allocator
    step(ref)
    times: dict[str, list[float]] = {"ours": [], "torch": []}
    for r in range(rounds):
        order = [("torch", ref), ("ours", ours)]
        for name, model in order if r % 2 == 0 else order[::-1]:
            times[name].append(step(model))
    ms_ours, ms_torch = statistics.median(times["ours"]), statistics.median(times["torch"])
    return {
        "batch": batch, "seq": seq, "loss_ours": loss_ours.item(), "loss_torch": loss_torch.item(),
        "loss_rel_err": loss_err, "grad_rel_err_max": errs[worst], "grad_rel_err_worst": worst,
        "grad_rel_err": errs, "match": match, "tolerance": {"loss": 1e-2, "grad": 5e-2},
        "ms_ours": ms_ours, "ms_torch": ms_torch, "ratio": ms_torch / ms_ours, "times_ms": times,
    }  # fmt: skip


def _infer(torch: Any, counters: Any, ref: Any, ours: Any, seq: int, vocab: int, decode: list[int], rounds: int,
           replays: int) -> dict[str, Any]:  # fmt: skip
    """Both models compiled with mode='reduce-overhead': a prefill function (static shapes) and a
    decode function (batch marked dynamic on its first call)."""
    gen = torch.Generator(device="cuda").manual_seed(2)
    compiled: dict[str, dict[str, Any]] = {}
    breaks: dict[str, int] = {}
    skips: dict[str, int] = {}
    compile_s: dict[str, float] = {}
    cases: list[dict[str, Any]] = []
    inputs = {"prefill": torch.randint(0, vocab, (1, seq), device="cuda", generator=gen)}
    for b in decode:
        inputs[f"decode{b}"] = torch.randint(0, vocab, (b, 1), device="cuda", generator=gen)

    for name, model in (("ours", ours), ("torch", ref)):
        torch._dynamo.reset()
        counters.clear()

        def prefill(ids: Any, model: Any = model) -> Any:
            return model(input_ids=ids, use_cache=False).logits

        def decode_step(ids: Any, model: Any = model) -> Any:
            return model(input_ids=ids, use_cache=False).logits

        fns = {"prefill": torch.compile(prefill, mode="reduce-overhead"),
               "decode": torch.compile(decode_step, mode="reduce-overhead")}  # fmt: skip
        t0 = time.perf_counter()
        with torch.no_grad():
            first_decode = True
            for case, ids in inputs.items():
                fn = fns["prefill" if case == "prefill" else "decode"]
                if case != "prefill" and first_decode and ids.shape[0] > 1:
                    torch._dynamo.mark_dynamic(ids, 0)
                    first_decode = False
                for _ in range(3):  # warm-up, record, replay
                    fn(ids)
        torch.cuda.synchronize()
        compile_s[name] = round(time.perf_counter() - t0, 1)
        breaks[name] = sum(counters["graph_break"].values())
        skips[name] = int(counters["inductor"]["cudagraph_skips"])
        compiled[name] = fns
        print(f"# compiled {name}: {compile_s[name]} s, graph breaks {breaks[name]}, cudagraph skips {skips[name]}",
              flush=True)  # fmt: skip

    def timed(fn: Any, ids: Any) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            fn(ids)
            start.record()
            for _ in range(replays):
                fn(ids)
            end.record()
        end.synchronize()
        return start.elapsed_time(end) / replays

    for case, ids in inputs.items():
        kind = "prefill" if case == "prefill" else "decode"
        with torch.no_grad():
            got = compiled["ours"][kind](ids).float().clone()
            want = compiled["torch"][kind](ids).float().clone()
        times: dict[str, list[float]] = {"ours": [], "torch": []}
        for r in range(rounds):
            order = ["torch", "ours"] if r % 2 == 0 else ["ours", "torch"]
            for name in order:
                times[name].append(timed(compiled[name][kind], ids))
        ms_ours, ms_torch = statistics.median(times["ours"]), statistics.median(times["torch"])
        cases.append({"name": case, "shape": list(ids.shape), "ms_ours": ms_ours, "ms_torch": ms_torch,
                      "ratio": ms_torch / ms_ours, "logits_rel_err": _rel(got, want), "times_ms": times})  # fmt: skip
    return {"graph_breaks": breaks, "cudagraph_skips": skips, "compile_s": compile_s, "cases": cases,
            "replays_per_sample": replays}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
