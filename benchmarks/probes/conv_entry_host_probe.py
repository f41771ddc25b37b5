"""Host time of one conv direction's call, ours against torch's (GPU machine).

For every case and direction of a conv shapes file (default: ResNet-50 b128's layers), with the
database of ``AUTOCUTLASS_DB`` under policy ``cached`` and vendor verdicts off (so that our entry is
what is timed wherever a record exists): the host microseconds per call, launches queued behind a
long GPU sleep so that none waits on the GPU, of

* ``entry``: the dispatcher's entry as a training step calls it (its output allocated in it);
* ``torch``: torch's call of the same direction (``F.conv2d``; ``aten.convolution_backward`` with
  only that gradient wanted);
* inside our entry, where a runner of ours is found in it: each of its launches (``_fn``, the
  wgrad's slab sum ``_sum``) and its split-K scratch look-up (``_workspace``: the current stream
  and the buffers) timed where the runner calls them.

Medians of ``--reps`` rounds of ``--calls`` calls. Prints a table; ``--json`` writes the rows.

GPU machine:
    AUTOCUTLASS_DB=... python benchmarks/probes/conv_entry_host_probe.py [--shapes FILE] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any


class _Timed:
    """A callable wrapped to sum its own host time and count its calls."""

    def __init__(self, f: Any) -> None:
        self.f, self.s, self.n = f, 0.0, 0

    def __call__(self, *a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        r = self.f(*a, **k)
        self.s += time.perf_counter() - t
        self.n += 1
        return r


def _runner_in(fn: Any, depth: int = 4) -> Any:
    """The runner object (one with ``_fn`` or ``_fns``: its compiled launches) that our entry closes
    over, searched through nested closures; None when there is none (torch's entry)."""
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if hasattr(v, "_fn") or hasattr(v, "_fns"):
            return v
        if depth > 0 and callable(v) and getattr(v, "__closure__", None):
            found = _runner_in(v, depth - 1)
            if found is not None:
                return found
    return None


def _wrap(r: Any) -> dict[str, list[_Timed]]:
    """Each launch of runner ``r`` wrapped in a ``_Timed`` (``_fn``, ``_sum``; the GEMM runner's
    ``_fns`` and ``_reduce`` dicts per rank), by part name."""
    parts: dict[str, list[_Timed]] = {}
    for k in ("_fn", "_sum"):
        if callable(getattr(r, k, None)):
            t = _Timed(getattr(r, k))
            setattr(r, k, t)
            parts[k] = [t]
    ws = getattr(r, "_workspace", None)
    if ws is not None and callable(getattr(ws, "get", None)):
        t = _Timed(ws.get)
        ws.get = t  # an instance attribute over the method
        parts["_workspace"] = [t]
    for k, name in (("_fns", "_fn"), ("_reduce", "_sum")):
        table = getattr(r, k, None)
        if isinstance(table, dict):
            for rank, f in list(table.items()):
                t = _Timed(f)
                table[rank] = t
                parts.setdefault(name, []).append(t)
    return parts


def _unwrap(r: Any) -> None:
    ws = getattr(r, "_workspace", None)
    if ws is not None and isinstance(ws.__dict__.get("get"), _Timed):
        del ws.get
    for k in ("_fn", "_sum"):
        if isinstance(getattr(r, k, None), _Timed):
            setattr(r, k, getattr(r, k).f)
    for k in ("_fns", "_reduce"):
        table = getattr(r, k, None)
        if isinstance(table, dict):
            for rank, f in list(table.items()):
                if isinstance(f, _Timed):
                    table[rank] = f.f


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="benchmarks/shapes-conv-resnet50.json")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--cprofile", action="append", default=[], metavar="CASE/DIRECTION",
                    help="also run that entry's timed calls under cProfile and print its costliest functions")
    ap.add_argument("--only", action="append", default=[], metavar="CASE", help="only these cases (repeatable)")
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")
    os.environ["AUTOCUTLASS_VENDOR_VERDICTS"] = "0"
    import torch
    import torch.nn.functional as F

    from autocutlass import api
    from autocutlass.dispatch import torch_served
    from autocutlass.ops.conv.backward import CONV2D_DGRAD, CONV2D_WGRAD
    from autocutlass.ops.conv.frontend import CONV2D

    cases = [c for c in json.load(open(ns.shapes))["cases"] if not ns.only or c["name"] in ns.only]
    d = api.dispatcher()
    cl = torch.channels_last

    def host_us(f: Any) -> float:
        res = []
        for _ in range(ns.reps):
            torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU work ahead of the launches
            t = time.perf_counter()
            for _ in range(ns.calls):
                f()
            res.append((time.perf_counter() - t) / ns.calls * 1e6)
            torch.cuda.synchronize()
        return statistics.median(res)

    rows = []
    for c in cases:
        pair = lambda v: list(v) if isinstance(v, list) else [v, v]  # noqa: E731
        st, pd, dl = pair(c.get("stride", 1)), pair(c.get("pad", 0)), pair(c.get("dilation", 1))
        x = torch.randn(c["N"], c["C"], c["H"], c["W"], device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
        w = torch.randn(c["K"], c["C"], c["R"], c["S"], device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
        y = F.conv2d(x, w, None, st, pd, dl)
        dy = torch.randn_like(y)
        for direction in c.get("directions", ["fprop"]):
            if direction == "fprop":
                entry = d.entry(CONV2D, x, w, None, st, pd, dl, 1, None, None)
                ours = lambda e=entry: e(x, w, None, st, pd, dl, 1, None, None)  # noqa: E731
                theirs = lambda: F.conv2d(x, w, None, st, pd, dl)  # noqa: E731
            else:
                fe = CONV2D_DGRAD if direction == "dgrad" else CONV2D_WGRAD
                other, size = (w, list(x.shape)) if direction == "dgrad" else (x, list(w.shape))
                entry = d.entry(fe, dy, other, size, st, pd, dl, 1)
                ours = lambda e=entry, o=other, s=size: e(dy, o, s, st, pd, dl, 1)  # noqa: E731
                mask = [direction == "dgrad", direction == "wgrad", False]
                theirs = lambda m=mask: torch.ops.aten.convolution_backward(dy, x, w, None, st, pd, dl, False, [0, 0], 1, m)  # noqa: E731
            row: dict[str, Any] = {"case": c["name"], "direction": direction,
                                   "served": "torch" if torch_served(entry) is not None else "ours"}  # fmt: skip
            ours()
            theirs()
            torch.cuda.synchronize()
            row["entry_us"] = round(host_us(ours), 1)
            row["torch_us"] = round(host_us(theirs), 1)
            r = _runner_in(entry)
            if r is not None:
                row["runner"] = type(r).__name__
                parts = _wrap(r)
                try:
                    host_us(ours)
                finally:
                    _unwrap(r)
                for k, ts in parts.items():
                    n = sum(t.n for t in ts)
                    if n:
                        row[k + "_us"] = round(sum(t.s for t in ts) / n * 1e6, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if f"{c['name']}/{direction}" in ns.cprofile:
                import cProfile
                import io
                import pstats

                prof = cProfile.Profile()
                prof.enable()
                host_us(ours)
                prof.disable()
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
                print(f"# cProfile of {c['name']}/{direction}, {ns.reps * ns.calls} calls, by own time")
                print("\n".join(line[:170] for line in buf.getvalue().splitlines()[4:]))
    print(f"{'case':28s} {'dir':6s} {'served':6s} {'entry':>7s} {'torch':>7s} {'_fn':>7s} {'_sum':>7s} {'_ws':>7s}  runner")
    for r in rows:
        print(f"{r['case']:28s} {r['direction']:6s} {r['served']:6s} {r['entry_us']:7.1f} {r['torch_us']:7.1f} "
              f"{r.get('_fn_us', float('nan')):7.1f} {r.get('_sum_us', float('nan')):7.1f} "
              f"{r.get('_workspace_us', float('nan')):7.1f}  {r.get('runner', '')}")  # fmt: skip
    if ns.json:
        with open(ns.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
