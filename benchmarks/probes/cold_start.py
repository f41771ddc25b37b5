"""Cold start: what a fresh process pays before its first autocutlass call returns, and where.

Each measurement is a fresh interpreter (``python -c``) that imports torch, then autocutlass,
makes its CUDA tensors, and times its first and second ``autocutlass.matmul`` (synchronised), with
the first call broken down by timing dispatch's stages where they run (the probe wraps them in
the child; the library carries no instrumentation):

* ``device``: the device query (``DeviceInfo``: properties, driver version), once per process;
* ``db_open``: opening the user and shipped databases (SQLAlchemy's import where it is made:
  ``AUTOCUTLASS_DB_SQLITE_READS=0``, a PostgreSQL database, or a write);
* ``db_lookup``: the lookups, the open excluded;
* ``kernel``: the runner: the compiled kernel from the kernel cache (``.so`` opened through
  TVM-FFI, or linked from the ``.o`` first, or compiled), helper kernels included;
* ``clusters``: the occupancy query of the persistent grid;
* ``launch``: the runner's first call less ``clusters`` (the CUDA module load and the launch),
  plus the wait for the kernel;
* ``other``: the rest (front-end planning, memo, imports done on the way).

Modes, per case: ``torch`` (``torch.matmul``'s first call, for reference); ``warm`` (a database
holding the case's record, a warm kernel cache); ``warm_objects_only`` (the same cache without
its ``.so`` libraries: a cache written before they existed, linked on first load); ``cold``
(the same database, empty kernel caches, ours and the DSL's: the kernel is compiled). A setup
child first warms the cache under policy ``cached`` and records the config it ran in a fresh
user database unless a shipped record serves the case (the H200's suite shapes). Each child also
reports whether it imported the DSL (``cutlass``), Optuna and SQLAlchemy.

GPU machine, from the repository root:
    python benchmarks/probes/cold_start.py [--json OUT] [--cases square,decode,tf32_nt] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

CASES: dict[str, dict[str, Any]] = {
    "square": {"m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16", "a_t": False, "b_t": False},
    "decode": {"m": 16, "n": 6144, "k": 4096, "dtype": "bfloat16", "a_t": False, "b_t": True},
    "tf32_nt": {"m": 4096, "n": 4096, "k": 4096, "dtype": "float32", "a_t": True, "b_t": False},
}
"""Suite shapes (the H200's shipped database holds their records): a square bf16 GEMM, a decode
GEMM (row/col weight), a tf32 GEMM with a column-major A. ``a_t``/``b_t``: the operand is a
transposed view."""

_TENSORS = r"""
def tensors(case):
    dt = getattr(torch, case["dtype"])
    if dt is torch.float32:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
    m, n, k = case["m"], case["n"], case["k"]
    a = torch.randn(k, m, device="cuda").to(dt).t() if case["a_t"] else torch.randn(m, k, device="cuda").to(dt)
    b = torch.randn(n, k, device="cuda").to(dt).t() if case["b_t"] else torch.randn(k, n, device="cuda").to(dt)
    return a, b
"""

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
spec = json.loads(sys.argv[1])
""" + _TENSORS + r"""
out = {"import_torch_s": t1 - t0}
if spec["mode"] == "torch":
    a, b = tensors(spec["case"])
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    torch.matmul(a, b)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    torch.matmul(a, b)
    torch.cuda.synchronize()
    out.update(first_call_s=t3 - t2, second_call_s=time.perf_counter() - t3)
    print(json.dumps(out))
    sys.exit(0)

t2 = time.perf_counter()
import autocutlass, autocutlass.api
t3 = time.perf_counter()
out["import_autocutlass_s"] = t3 - t2

# Time dispatch's stages where they run (first call of each wrapped function only counts).
from autocutlass import dispatch
from autocutlass.kernels.hopper_gemm import runner as gemm_runner
spent = {}

def timed(owner, name, label):
    fn = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
    setattr(owner, name, wrapper)

timed(dispatch, "current_device", "device")
timed(dispatch.Dispatcher, "_open_store", "db_open")
timed(dispatch.Dispatcher, "_lookup", "db_lookup_incl_open")
timed(dispatch.Dispatcher, "_runner", "kernel")
timed(gemm_runner, "max_active_clusters", "clusters")
timed(gemm_runner.HopperGemmRunner, "__call__", "runner_call")

a, b = tensors(spec["case"])
torch.cuda.synchronize()
before = set(sys.modules)
t4 = time.perf_counter()
autocutlass.matmul(a, b)
torch.cuda.synchronize()
t5 = time.perf_counter()
imported = set(sys.modules) - before
spent_first = dict(spent)
autocutlass.matmul(a, b)
torch.cuda.synchronize()
t6 = time.perf_counter()

first = t5 - t4
parts = {
    "device": spent_first.get("device", 0.0),
    "db_open": spent_first.get("db_open", 0.0),
    "db_lookup": spent_first.get("db_lookup_incl_open", 0.0) - spent_first.get("db_open", 0.0),
    "kernel": spent_first.get("kernel", 0.0),
    "clusters": spent_first.get("clusters", 0.0),
}
parts["launch"] = spent_first.get("runner_call", 0.0) - parts["clusters"]
parts["other"] = first - sum(parts.values())
from autocutlass.kernels.object_cache import _STATES
caches = {prefix: {"compiled": s.stats.compiled, "disk_hits": s.stats.disk_hits} for (prefix, _), s in _STATES.items()}
top = {m.split(".")[0] for m in imported}
out.update(
    first_call_s=first, second_call_s=t6 - t5, breakdown_s=parts, stats=autocutlass.stats().as_dict(), caches=caches,
    imported_during_first_call={"cutlass": "cutlass" in top, "optuna": "optuna" in top,
                                "sqlalchemy": "sqlalchemy" in top, "tvm_ffi": "tvm_ffi" in top},
    dsl_in_process="cutlass" in sys.modules, optuna_in_process="optuna" in sys.modules,
)
print(json.dumps(out))
"""

_SETUP = r"""
import json, sys, torch
spec = json.loads(sys.argv[1])
""" + _TENSORS + r"""
import autocutlass
from autocutlass import settings
from autocutlass.db import TuningStore
from autocutlass.device import current_device
from autocutlass.kernels import get_family
a, b = tensors(spec["case"])
autocutlass.matmul(a, b)  # policy cached: the stored record, else the default config (a miss)
torch.cuda.synchronize()
recorded = None
if autocutlass.stats().db_hits == 0:
    fam = get_family("hopper_gemm")
    hard_key = current_device().hard_key(fam.source_hash())
    store = TuningStore(settings.current().db_url)
    for problem in store.pending_misses(hard_key):
        config = fam.seeds(problem)[0]  # what policy cached ran for the miss
        store.record_best(problem, hard_key, fam.name, fam.config_to_dict(config), 1.0, 1.0)
        recorded = problem.describe()
print(json.dumps({"stats": autocutlass.stats().as_dict(), "recorded": recorded}))
"""


def run(code: str, spec: dict[str, Any], env: dict[str, str], timeout: float = 900) -> dict[str, Any]:
    print(f"cold_start: {spec.get('mode', 'setup')} {spec['case']}", file=sys.stderr, flush=True)
    t = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], env=env, cwd=REPO, capture_output=True,
                           text=True, timeout=timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    wall = time.perf_counter() - t
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        return {"error": f"exit {r.returncode}: {r.stderr[-3000:]}"}
    got = dict(json.loads(lines[-1]))
    got["process_wall_s"] = wall
    return got


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median first call (its own breakdown), with every run's first call."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    ok.sort(key=lambda r: r["first_call_s"])
    med = dict(ok[len(ok) // 2])
    med["first_call_s_all"] = [r["first_call_s"] for r in runs if "error" not in r]
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--cases", default="square", help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per warm mode (median)")
    ap.add_argument("--no-cold", dest="cold", action="store_false", help="skip the empty-cache mode (compiles)")
    ns = ap.parse_args()

    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    if gpu is None:
        print("cold_start: no CUDA GPU", file=sys.stderr)
        return 1
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    doc: dict[str, Any] = {"probe": "cold_start", "gpu": gpu, "date": time.strftime("%Y-%m-%d %H:%M"),
                           "python": platform.python_version(), "torch": torch.__version__, "cases": {}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="autocutlass-cold-") as tmp:
        root = Path(tmp)
        warm_cache, objects_only, db = root / "warm", root / "objects_only", root / "user.sqlite"
        base = {**os.environ, "PYTHONPATH": pythonpath, "AUTOCUTLASS_POLICY": "cached", "AUTOCUTLASS_DB": str(db),
                "AUTOCUTLASS_CACHE_DIR": str(warm_cache), "CUTE_DSL_CACHE_DIR": str(root / "cute_dsl_warm"),
                "AUTOCUTLASS_DSL_FREE_LOAD": os.environ.get("AUTOCUTLASS_DSL_FREE_LOAD", "1")}  # fmt: skip
        base.pop("AUTOCUTLASS_STRICT", None)
        for name in ns.cases.split(","):
            case = CASES[name]
            res: dict[str, Any] = {"case": case}
            res["setup"] = run(_SETUP, {"case": case}, base)
            res["torch"] = median_of([run(_CHILD, {"mode": "torch", "case": case}, base) for _ in range(ns.repeats)])
            res["warm"] = median_of([run(_CHILD, {"mode": "autocutlass", "case": case}, base)
                                     for _ in range(ns.repeats)])  # fmt: skip
            shutil.rmtree(objects_only, ignore_errors=True)
            shutil.copytree(warm_cache, objects_only, ignore=shutil.ignore_patterns("*.so"))
            res["warm_objects_only"] = run(_CHILD, {"mode": "autocutlass", "case": case},
                                           {**base, "AUTOCUTLASS_CACHE_DIR": str(objects_only)})  # fmt: skip
            if ns.cold:
                cold = root / f"cold-{name}"
                res["cold"] = run(_CHILD, {"mode": "autocutlass", "case": case},
                                  {**base, "AUTOCUTLASS_CACHE_DIR": str(cold),
                                   "CUTE_DSL_CACHE_DIR": str(cold / "cute_dsl")})  # fmt: skip
            doc["cases"][name] = res
    print_table(doc)
    if ns.json:
        Path(ns.json).write_text(json.dumps(doc, indent=1))
        print(f"wrote {ns.json}")
    return 0


def print_table(doc: dict[str, Any]) -> None:
    cols = ["device", "db_open", "db_lookup", "kernel", "clusters", "launch", "other"]
    print(f"cold start on {doc['gpu']} ({doc['date']}); seconds; first call after the imports, synchronised")
    head = f"{'case':8} {'mode':18} {'torch':>6} {'import':>6} {'first':>6} " + " ".join(f"{c:>9}" for c in cols)
    print(head + f" {'2nd ms':>7} {'total*':>6}  imported during the first call")
    for name, res in doc["cases"].items():
        for mode in ("torch", "warm", "warm_objects_only", "cold"):
            r = res.get(mode)
            if r is None:
                continue
            if "error" in r:
                print(f"{name:8} {mode:18} FAILED: {r['error'][-400:]}")
                continue
            imp = r.get("import_autocutlass_s")
            parts = r.get("breakdown_s", {})
            total = (imp or 0.0) + r["first_call_s"]
            flags = ", ".join(k for k, v in r.get("imported_during_first_call", {}).items() if v)
            print(f"{name:8} {mode:18} {r['import_torch_s']:6.2f} {imp if imp is not None else float('nan'):6.2f} "
                  f"{r['first_call_s']:6.3f} " + " ".join(f"{parts.get(c, float('nan')):9.3f}" for c in cols)
                  + f" {r['second_call_s'] * 1e3:7.2f} {total:6.2f}  {flags or '-'}")  # fmt: skip
    print("total*: import autocutlass + first call, on top of import torch (target <= 2 s; first call <= 1 s)")
    setup_notes = [f"{n}: recorded {r['setup'].get('recorded')}" for n, r in doc["cases"].items()
                   if r.get("setup", {}).get("recorded")]  # fmt: skip
    if setup_notes:
        print("no shipped record; the default config recorded in the probe's database: " + "; ".join(setup_notes))


if __name__ == "__main__":
    sys.exit(main())
