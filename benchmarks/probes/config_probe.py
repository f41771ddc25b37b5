"""Probe: given configs against a database's records and the vendor, side by side.

For each case (a shapes file and a case name, e.g. ``benchmarks/shapes-conv.json:rn50-l4-3x3/fprop``)
the candidates are the database's best record of each of our families (labelled ``record``: what
a call runs there; session 36's calls b, c and f, before this used the store, took each family's
fastest stored trial) and every ``--config FAMILY:JSON`` that its family's ``check`` accepts for the
case. They are compiled in ``--workers`` GPU-blind processes,
verified against the float32 reference with NaN-poisoned outputs (``evaluation.verify``), and timed
with the vendor's call (``evaluation.torch_baseline``; cuDNN with ``cudnn.benchmark`` on) in
``--rounds`` interleaved rounds (``side_by_side``: L2 flushed by writing, medians). Prints one
table (median microseconds and the ratio to the vendor, > 1: ours faster) and writes ``--json``.
With ``--kernels N`` each candidate and the vendor also run N times under ``torch.profiler``, and
the mean GPU time of every kernel one call launches is printed and kept (``kernels`` in the JSON:
where a call's time goes, e.g. an unfolding pass, the GEMM and a split-K sum).

GPU machine, from the project root:

    python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite \
        --case benchmarks/shapes-conv.json:rn50-l4-3x3/fprop \
        --config 'hopper_conv:{"tile_m": 64, "tile_n": 112, "tile_k": 128}' --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from side_by_side import interleaved, paired_ratio, write_json  # noqa: E402


def records(db: str, problem: Any) -> list[tuple[str, dict[str, Any]]]:
    """(family, config dict) of each of our families' best record of ``problem`` in the database
    file ``db`` (``TuningStore.bests``: what a call of it runs there)."""
    from autocutlass.db.store import TuningStore

    key = problem.key()
    return [(r.family, r.config) for r in TuningStore(db, read_only=True, immutable=True).bests() if r.problem.key() == key]


def candidates(problem: Any, recs: list[tuple[str, dict[str, Any]]],
               extra: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any, Any]]:
    """(label, family, config) to time, each accepted by its family's check."""
    from autocutlass.kernels import get_family

    out: list[tuple[str, Any, Any]] = []
    for fam_name, cfg_dict in recs:
        fam = get_family(fam_name)
        out.append((f"record {fam_name.removeprefix('hopper_')}", fam, fam.config_from_dict(cfg_dict)))
    for fam_name, cfg_dict in extra:
        fam = get_family(fam_name)
        cfg = fam.config_from_dict(cfg_dict)
        out.append((f"config {fam_name.removeprefix('hopper_')} {cfg.short()}", fam, cfg))
    seen, kept = set(), []
    for label, fam, cfg in out:
        if (fam.name, cfg) not in seen and fam.check(cfg, problem) is None:
            seen.add((fam.name, cfg))
            kept.append((label, fam, cfg))
    return kept


def kernel_times(fn: Any, calls: int) -> list[tuple[str, float]]:
    """(kernel name, mean GPU microseconds per call) of every kernel ``calls`` calls of ``fn``
    launch, in first-launch order (``torch.profiler``; one warm-up call first)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total: dict[str, float] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            total[ev.name] = total.get(ev.name, 0.0) + ev.device_time
    return [(name, round(us / calls, 2)) for name, us in total.items()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--case", action="append", required=True, help="FILE:NAME (repeatable)")
    ap.add_argument("--config", action="append", default=[], help="FAMILY:JSON (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--kernels", type=int, default=0, help="also profile each candidate N calls, kernel by kernel")
    ap.add_argument("--json")
    a = ap.parse_args()

    import torch

    from autocutlass.cli.kernels import _compile_pool
    from autocutlass.cli.shapes import load_cases
    from autocutlass.device import current_device
    from autocutlass.ops.registry import evaluation_for

    torch.backends.cudnn.benchmark = True
    cache = Path(tempfile.mkdtemp(prefix="config-probe-")) / "kernels"
    cache.mkdir()
    os.environ["AUTOCUTLASS_CACHE_DIR"] = str(cache.parent)
    dev = current_device(0)
    flush = 2 * dev.l2_bytes
    extra = [(spec.split(":", 1)[0], json.loads(spec.split(":", 1)[1])) for spec in a.config]
    rows: list[dict[str, Any]] = []
    for spec in a.case:
        path, name = spec.rsplit(":", 1)
        (case,) = load_cases(path, [name])
        prob = case.problem
        cands = candidates(prob, records(a.db, prob), extra)
        by_fam: dict[str, tuple[Any, list[Any]]] = {}
        for _, fam, cfg in cands:
            by_fam.setdefault(fam.name, (fam, []))[1].append(cfg)
        for fam_name, (fam, cfgs) in by_fam.items():
            ns = types.SimpleNamespace(workers=a.workers, arch="sm_90a", family=fam_name)
            for label, err in _compile_pool(ns, fam, cfgs, prob):
                if err is not None:
                    print(f"compile failed: {label}: {err[:300]}", flush=True)
        ev = evaluation_for(prob)
        inputs = ev.make_inputs(prob, device="cuda", seed=0)
        ref = ev.reference(prob, inputs)
        timers = {"vendor": ev.torch_baseline(prob, inputs)}
        labels = {}
        for label, fam, cfg in cands:
            try:
                runner = fam.compile(cfg, prob)
                ok, why = ev.verify(runner, prob, inputs, ref)
            except Exception as e:  # noqa: BLE001 - a probe reports and goes on
                ok, why = False, f"{type(e).__name__}: {e}"
            if not ok:
                print(f"{case.name} {label} {cfg.short()}: NOT VERIFIED: {str(why)[:300]}", flush=True)
                rows.append({"case": case.name, "label": label, "family": fam.name, "config": fam.config_to_dict(cfg),
                             "verified": False, "why": str(why)[:500]})  # fmt: skip
                continue
            timers[label] = (lambda r=runner: inputs.run(r))
            labels[label] = (fam, cfg)
        per = interleaved(timers, a.rounds, flush)
        split = {label: kernel_times(fn, a.kernels) for label, fn in timers.items()} if a.kernels else {}
        if "vendor" in split:
            rows.append({"case": case.name, "label": "vendor", "kernels": split["vendor"]})
        for label, ks in split.items():
            print(f"{case.name:20s} {label[:60]:60s} kernels: "
                  + "; ".join(f"{name[:70]} {us:.2f} us" for name, us in ks), flush=True)
        vendor_us = sorted(per["vendor"])[len(per["vendor"]) // 2] * 1000
        for label, (fam, cfg) in labels.items():
            us = sorted(per[label])[len(per[label]) // 2] * 1000
            ratio = paired_ratio(per, label, "vendor")
            rows.append({"case": case.name, "label": label, "family": fam.name, "config": fam.config_to_dict(cfg),
                         "short": cfg.short(), "verified": True, "us": round(us, 2), "vendor_us": round(vendor_us, 2),
                         "ratio": ratio, "tflops": round(prob.flops / us / 1e6, 1),
                         "kernels": split.get(label)})  # fmt: skip
            print(f"{case.name:20s} {label[:60]:60s} {us:8.2f} us  vendor {vendor_us:8.2f}  x{ratio:.3f}",
                  flush=True)
    doc = {"what": "config probe", "gpu": dev.gpu_name, "torch": torch.__version__, "dsl": dev.dsl_version,
           "db": a.db, "rounds": a.rounds, "protocol": "search.timing v1, write flush, interleaved rounds, medians",
           "rows": rows}  # fmt: skip
    write_json(a.json, doc)
    print("\ncase                         best record  best config   (x vendor)")
    for name in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == name and r.get("verified")]
        rec = max((r["ratio"] for r in mine if r["label"].startswith("record")), default=0)
        new = max((r["ratio"] for r in mine if r["label"].startswith("config")), default=0)
        print(f"{name:28s} x{rec:.3f}       x{new:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
