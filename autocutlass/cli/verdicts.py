"""``autocutlass tune --verdicts [FILE.json]``: this GPU's stored winners re-timed against torch, so
that their vendor verdicts (``autocutlass.vendor``) are measured again without a new search.

A verdict is keyed by torch's and CUDA's versions: after an upgrade of torch (and with it cuBLAS
and cuDNN) a database has no verdict left, and our kernels serve every tuned problem even where the
new torch is faster; records tuned before session 21 hold no host times, so their verdicts compare
GPU time alone. Each stored best of ``--db`` measured on this GPU under its family's current kernel
sources (of ``FILE``'s cases only, with ``--only`` as for ``--shapes``) runs the tuner's finals
(``search.tuner.FINAL_ROUNDS`` interleaved rounds, each side verified first) with torch beside it;
the best record takes the finals' time of its config (its trial kept), and torch's time with both
host times becomes the problem's vendor record, the two of one run as a tuning records them, with
torch's time in each of the op's ``baseline_variants`` as that variant's vendor record (conv2d:
cuDNN outside benchmark mode, PyTorch's default, which a database tuned before session 43 lacks). A
problem whose finals do not finish keeps its records and is listed. One finals per record, where
a tuning runs a search before its finals.

Where two families hold records of one problem (a pointwise wgrad under ``hopper_gemm`` and
``hopper_conv_wgrad``), they share its vendor record (the vendor hard key drops the kernel hash):
the family re-timed last leaves its host time there, as the family tuned last does in a tuning.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autocutlass.cli.common import print_table
from autocutlass.cli.shapes import load_cases
from autocutlass.db import TuningStore
from autocutlass.db.records import BestRecord
from autocutlass.device import DeviceInfo
from autocutlass.kernels import get_family
from autocutlass.search.timing import Timing
from autocutlass.search.tuner import FINAL_ROUNDS, Evaluator, record_vendor
from autocutlass.search.workers import OK
from autocutlass.vendor import VENDOR_FAMILY, host_config, host_times, vendor_faster

ALL = "all"
"""``--verdicts`` without a file: every winner of ``--db`` measured on this GPU."""


def records_to_refresh(store: TuningStore, device: DeviceInfo, cases_file: str, only: Sequence[str] | None
                       ) -> list[BestRecord]:  # fmt: skip
    """The best records of ``store`` measured on ``device`` under their family's current sources,
    of ``cases_file``'s problems unless it is ``ALL``."""
    keys = None if cases_file == ALL else {c.problem.key() for c in load_cases(cases_file, only)}
    out = []
    for r in store.bests():
        if r.family == VENDOR_FAMILY or (keys is not None and r.problem.key() not in keys):
            continue
        try:
            family = get_family(r.family)
        except KeyError:
            continue
        if r.hard_key == device.hard_key(family.source_hash()):
            out.append(r)
    return out


def refresh_one(store: TuningStore, device: DeviceInfo, rec: BestRecord, evaluator: Evaluator) -> dict[str, Any]:
    """The finals of ``rec``'s config against torch, recorded; the table row."""
    p = rec.problem
    row: dict[str, Any] = {"problem": p.describe(), "family": rec.family, "old_ms": rec.median_ms}
    out = evaluator.finals(p, [dict(rec.config)], FINAL_ROUNDS)
    entry = out.entries[0] if out is not None and out.entries else None
    if out is None or entry is None or entry.state != OK or entry.timing is None or out.torch is None:
        if entry is None:
            why = "the finals did not finish"
        elif entry.state != OK:
            why = f"{entry.state}: {entry.reason}"
        else:
            why = "torch was not timed" if out.torch is None else "no time"
        row.update(status=f"not re-timed ({why}); its records are kept")
        return row
    ours, theirs = entry.timing, out.torch
    trial = next((t.id for t in store.trials(p, rec.hard_key) if t.family == rec.family and t.config == rec.config),
                 None)  # fmt: skip
    store.record_best(p, rec.hard_key, rec.family, rec.config, ours.median_ms, ours.tflops(p.flops), trial_id=trial)
    record_vendor(store, p, rec.hard_key, (device.torch_version, device.cuda_runtime_version), theirs, ours,
                  out.variants)  # fmt: skip

    def served_by(t: Timing) -> str:
        return "torch" if vendor_faster(ours.median_ms, t.median_ms, host_times(host_config(t.host_ms, ours.host_ms))) \
            else rec.family

    row.update(status="re-timed", ours_ms=ours.median_ms, torch_ms=theirs.median_ms,
               ours_host_ms=ours.host_ms, torch_host_ms=theirs.host_ms,
               served_by_gpu_time="torch" if vendor_faster(ours.median_ms, theirs.median_ms) else rec.family,
               served_by=served_by(theirs),
               variants={v: {"torch_ms": t.median_ms, "torch_host_ms": t.host_ms, "served_by": served_by(t)}
                         for v, t in sorted(out.variants.items())})  # fmt: skip
    return row


def _fmt(v: Any, scale: float = 1.0) -> str:
    return "-" if v is None else f"{v * scale:.1f}"


def _variants(row: dict[str, Any]) -> str:
    """The table cell of torch's variants (``vendor``: variants) in a row: each one's time and verdict."""
    return "; ".join(f"{v}: {_fmt(d['torch_ms'], 1e3)}, {d['served_by']}" for v, d in row.get("variants", {}).items()) or "-"


def refresh_verdicts(ns: argparse.Namespace, store: TuningStore, device: DeviceInfo,
                     evaluator_for: Callable[[str], Evaluator], lock: Callable[[], Any]) -> int:  # fmt: skip
    """The ``--verdicts`` run (module doc): ``evaluator_for(family name)`` gives the family's
    evaluator, ``lock()`` the GPU lock a tuning holds. Prints the table; ``--json`` writes the rows."""
    try:
        records = records_to_refresh(store, device, ns.verdicts, ns.only)
    except ValueError as e:
        print(f"autocutlass: error: {e}", file=sys.stderr)
        return 1
    if not records:
        print(f"no best record of {device.gpu_name} under the current kernel sources in {store.display}")
        return 0
    rows = []
    for i, rec in enumerate(records, 1):
        with lock():
            row = refresh_one(store, device, rec, evaluator_for(rec.family))
        print(f"[{i}/{len(records)}] {row['problem']}: {row['status']}", file=sys.stderr)
        rows.append(row)
    header = ("problem", "family", "old us", "ours us", "torch us", "ours host us", "torch host us", "GPU time: served by",
              "GPU + host: served by", "torch's variants: us, served by")  # fmt: skip
    table = [(r["problem"], r["family"], _fmt(r["old_ms"], 1e3), _fmt(r.get("ours_ms"), 1e3),
              _fmt(r.get("torch_ms"), 1e3), _fmt(r.get("ours_host_ms"), 1e3), _fmt(r.get("torch_host_ms"), 1e3),
              r.get("served_by_gpu_time", r["status"]), r.get("served_by", "-"), _variants(r)) for r in rows]  # fmt: skip
    print_table(f"verdicts re-timed on {device.gpu_name} in {store.display}", header, table,
                right=lambda i: 2 <= i <= 6)  # fmt: skip
    flips = sum(1 for r in rows if r.get("served_by") not in (None, r.get("served_by_gpu_time")))
    print(f"{sum(r['status'] == 're-timed' for r in rows)} of {len(rows)} re-timed; host time changes "
          f"{flips} verdict(s)")  # fmt: skip
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=2, sort_keys=True) + "\n")
    return 0


__all__ = ["ALL", "records_to_refresh", "refresh_one", "refresh_verdicts"]
