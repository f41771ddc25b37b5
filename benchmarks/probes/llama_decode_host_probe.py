"""Probe: where an eager Llama decode step spends its host time, ours vs torch.

A 2-layer Llama-3-8B-shaped ``LlamaForCausalLM`` (random init, bf16), ``swap_linear_`` applied to a
copy; under ``no_grad`` a decode step (``--batch`` x 1 token, no KV cache) is timed end to end
(CUDA-synchronised, medians of ``--rounds`` rounds of ``--reps`` steps, interleaved), then
``--profile`` steps of each model run under cProfile and the top functions by own time are printed,
and a single ``nn.Linear`` call on the decode input ([batch, 1, 4096] x [4096, 4096]) is timed
host-side (1000 calls, no synchronisation inside: the launch cost per call).

GPU machine: python benchmarks/probes/llama_decode_host_probe.py [--batch 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import json
import pstats
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--profile", type=int, default=20)
    ap.add_argument("--gated-mlp", action="store_true", help="also swap the MLPs (swap_gated_mlp_)")
    ap.add_argument("--qkv", action="store_true", help="also pack each attention's q/k/v projections (swap_qkv_)")
    ap.add_argument("--json", default=None)
    ns = ap.parse_args()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import autocutlass

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=2, vocab_size=128256)  # fmt: skip
    torch.manual_seed(0)
    with torch.device("cuda"):
        ref = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ours = autocutlass.swap_linear_(copy.deepcopy(ref)).eval()
    if ns.gated_mlp:
        ours = autocutlass.swap_gated_mlp_(ours)
    if ns.qkv:
        ours = autocutlass.swap_qkv_(ours)
    ids = torch.randint(0, cfg.vocab_size, (ns.batch, 1), device="cuda")
    out: dict = {"device": torch.cuda.get_device_name(), "batch": ns.batch}
    with torch.no_grad():
        for m in (ours, ref, ours, ref):
            m(input_ids=ids, use_cache=False)
        torch.cuda.synchronize()
        times: dict[str, list[float]] = {"ours": [], "torch": []}
        for r in range(ns.rounds):
            for who, m in [("ours", ours), ("torch", ref)][:: 1 if r % 2 == 0 else -1]:
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(ns.reps):
                    m(input_ids=ids, use_cache=False)
                torch.cuda.synchronize()
                times[who].append((time.perf_counter() - t) / ns.reps * 1e3)
        out["step_ms"] = {k: statistics.median(v) for k, v in times.items()}
        split: dict[str, list[tuple[float, float]]] = {"ours": [], "torch": []}
        for r in range(ns.rounds * ns.reps):
            for who, m in [("ours", ours), ("torch", ref)][:: 1 if r % 2 == 0 else -1]:
                torch.cuda.synchronize()
                t = time.perf_counter()
                m(input_ids=ids, use_cache=False)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                split[who].append(((t1 - t) * 1e3, (time.perf_counter() - t1) * 1e3))
        out["host_then_wait_ms"] = {k: [statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)]
                                    for k, v in split.items()}
        print(f"one step, host ms then the wait for the GPU: {out['host_then_wait_ms']}")
        # The same behind 20 ms of queued GPU work (torch.cuda._sleep): a launch that waits for the
        # GPU shows up as host time here; pure host overhead does not change.
        behind: dict[str, list[float]] = {"ours": [], "torch": []}
        cycles = int(20e-3 * torch.cuda.get_device_properties(0).clock_rate * 1e3)
        for r in range(20):
            for who, m in [("ours", ours), ("torch", ref)][:: 1 if r % 2 == 0 else -1]:
                torch.cuda.synchronize()
                torch.cuda._sleep(cycles)
                t = time.perf_counter()
                m(input_ids=ids, use_cache=False)
                behind[who].append((time.perf_counter() - t) * 1e3)
                torch.cuda.synchronize()
        out["host_ms_behind_20ms_of_gpu_work"] = {k: statistics.median(v) for k, v in behind.items()}
        print(f"one step's host ms behind 20 ms of queued GPU work: {out['host_ms_behind_20ms_of_gpu_work']}")
        print(f"decode step: ours {out['step_ms']['ours']:.3f} ms, torch {out['step_ms']['torch']:.3f} ms")
        for who, m in (("ours", ours), ("torch", ref)):
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(ns.profile):
                m(input_ids=ids, use_cache=False)
            prof.disable()
            torch.cuda.synchronize()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
            print(f"== cProfile {who} ({ns.profile} steps)\n" + "\n".join(s.getvalue().splitlines()[:40]))
        # Host time inside the module forwards, in the model, accumulated over 20 steps each: ours
        # (autocutlass.nn.Linear, PackedLinear, GatedMLP), torch (nn.Linear, the MLP module).
        import torch.nn as nn

        from autocutlass.nn import GatedMLP, PackedLinear

        mlp_cls = type(ref.model.layers[0].mlp)
        classes = {"ours": (autocutlass.nn.Linear, PackedLinear, GatedMLP), "torch": (nn.Linear, mlp_cls)}
        spent: dict[str, float] = {}
        calls: dict[str, int] = {}
        saved = []

        def timed(cls, label):  # noqa: ANN001, ANN202
            orig = cls.__dict__["forward"]

            def fwd(self, x):  # noqa: ANN001, ANN202
                t = time.perf_counter()
                y = orig(self, x)
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
                calls[label] = calls.get(label, 0) + 1
                return y

            saved.append((cls, orig))
            cls.forward = fwd

        for who, cls_list in classes.items():
            for cls in cls_list:
                timed(cls, f"{who}:{cls.__name__}")
        try:
            for _ in range(20):
                ours(input_ids=ids, use_cache=False)
                torch.cuda.synchronize()
                ref(input_ids=ids, use_cache=False)
                torch.cuda.synchronize()
        finally:
            for cls, orig in saved:
                cls.forward = orig
        out["module_forward_host_us_in_model"] = {k: spent[k] / calls[k] * 1e6 for k in spent}
        out["module_forward_calls_per_step"] = {k: calls[k] / 20 for k in calls}
        out["linear_forward_host_us_in_model"] = {
            "ours": out["module_forward_host_us_in_model"].get("ours:Linear"),
            "torch": out["module_forward_host_us_in_model"].get("torch:Linear")}
        for k in sorted(spent):
            print(f"host us per {k} forward inside the model: {spent[k] / calls[k] * 1e6:.1f} ({calls[k] / 20:g} per step)")
        from torch.profiler import ProfilerActivity, profile

        for who, m in (("ours", ours), ("torch", ref)):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    m(input_ids=ids, use_cache=False)
                torch.cuda.synchronize()
            print(f"== CUDA kernels {who} (5 steps)")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=10, max_name_column_width=70))
        x = torch.randn(ns.batch, 1, 4096, device="cuda", dtype=torch.bfloat16)
        lin_t = ref.model.layers[0].self_attn.o_proj
        lin_o = ours.model.layers[0].self_attn.o_proj
        host: dict[str, float] = {}
        for who, m in (("ours", lin_o), ("torch", lin_t), ("ours", lin_o), ("torch", lin_t)):
            for _ in range(50):
                m(x)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(1000):
                m(x)
            host[who] = (time.perf_counter() - t) * 1e3  # us per call
            torch.cuda.synchronize()
        out["linear_launch_us"] = host
        print(f"o_proj call on [{ns.batch},1,4096]: ours {host['ours']:.1f} us, torch {host['torch']:.1f} us (host, per call)")
        print("stats", autocutlass.stats().as_dict())
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
