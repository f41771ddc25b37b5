"""``autocutlass bench``'s measuring, on the GPU: the bandwidth roof, each case (verified first,
then timed in alternating rounds against torch.matmul, torch._scaled_mm or torch.compile), the
hit path's host cost and the first call in fresh processes. It hands plain data (``Measured``,
dicts) to ``report``, which builds the rows, the JSON and the table; ``plot`` draws the PNG.

Per case, in this one process: operands as the shapes file says (``operand_spec``), one
``autocutlass.matmul(a, b, out=d)`` (fp8 'e4m3' cases: ``autocutlass.scaled_mm`` with random
per-tensor scales, against ``torch._scaled_mm``, both with ``use_fast_accum=True``) on a
NaN-poisoned ``d`` (it may tune or look up the database: its wall time is ``tune_or_lookup_s``,
the ``autocutlass.stats()`` delta says what it did) checked against the float32 reference (a
wrong result marks the case FAILED and it is not timed), then ``--rounds`` rounds that each
time autocutlass, torch.matmul and optionally ``torch.compile(mode="max-autotune-no-cudagraphs")``
with the timing protocol of ``autocutlass.search.timing`` (order reversed every other round).
fp32 cases run with ``torch.backends.cuda.matmul.fp32_precision = "tf32"`` on every side.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from autocutlass.cli.bench.cases import BenchCase, OperandSpec, Roofs
from autocutlass.cli.bench.plot import plot_report
from autocutlass.cli.bench.report import (
    Measured,
    assemble_report,
    case_row,
    default_out_dir,
    first_call_case,
    first_call_path,
    print_report,
    progress_line,
    stats_delta,
    write_json,
)
from autocutlass.ops.gemm.problem import DType

HOST_OVERHEAD_SHAPE = (64, 64, 64)
HOST_OVERHEAD_CALLS = 2000
HOST_OVERHEAD_ROUNDS = 10
COPY_BYTES = 1 << 30
"""Size of the device-to-device copy that measures the bandwidth roof (each of source and destination)."""
FIRST_CALL_TIMEOUT_S = 900

COMPILE_MODE = "max-autotune-no-cudagraphs"


def run_bench(ns: argparse.Namespace, cases: Sequence[BenchCase]) -> int:
    """Measure every case, the host overhead and the first call; write JSON and PNG; print."""
    import torch

    import autocutlass
    from autocutlass import settings as settings_mod
    from autocutlass.device import current_device, dsl_version
    from autocutlass.kernels import source_hashes

    settings = settings_mod.current()
    policy = ns.policy or settings.policy.value
    dev = current_device()
    if dev.cc != "9.0":
        print(f"autocutlass bench: warning: autocutlass's kernels are for sm_90 (H100/H200); {dev.gpu_name} is cc "
              f"{dev.cc}, so every case will fall back to torch", file=sys.stderr)  # fmt: skip
    date = dt.date.today().isoformat()
    out_dir = Path(ns.out) if ns.out else default_out_dir(dev.gpu_name, date)
    flush = 2 * dev.l2_bytes
    if ns.bandwidth_roof is not None:
        bw, bw_source = ns.bandwidth_roof, "given (--bandwidth-roof)"
    else:
        bw = _measure_bandwidth(flush, ns.flush)
        bw_source = f"measured: device-to-device copy of {COPY_BYTES >> 20} MiB, bytes read + written"
    roofs = Roofs(bandwidth_tbps=bw, bandwidth_source=bw_source, tflops_16bit=ns.compute_roof[0],
                  tflops_tf32=ns.compute_roof[1])  # fmt: skip
    meta = {
        "gpu": dev.gpu_name, "cc": dev.cc, "sm_count": dev.sm_count, "date": date,
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "nvidia-cutlass-dsl": dsl_version(),
                     "kernel_source_hashes": source_hashes(), "driver": dev.driver_version,
                     "autocutlass": autocutlass.__version__},
        "settings": {"shapes": str(ns.shapes), "only": ns.only, "vs": list(ns.vs), "policy": policy,
                     "rounds": ns.rounds, "flush": ns.flush, "db": settings.db_url, "cache_dir": str(settings.cache_dir),
                     "tune_trials": settings.tune_trials, "tune_seconds": settings.tune_seconds},
    }  # fmt: skip
    json_path, png_path = out_dir / "bench.json", out_dir / "bench.png"
    rows: list[dict[str, Any]] = []

    def report(host: Mapping[str, Any] | None = None, first: Mapping[str, Any] | None = None) -> dict[str, Any]:
        doc = assemble_report(meta=meta, roofs=roofs, rows=rows, host_overhead=host, first_call=first)
        write_json(doc, json_path)
        return doc

    with autocutlass.policy(policy):
        for i, case in enumerate(cases, 1):
            measured = None if case.skip else _measure_case(case, ns.vs, ns.rounds, flush, policy, ns.flush)
            rows.append(case_row(case, roofs, measured))
            print(progress_line(i, len(cases), rows[-1]), file=sys.stderr, flush=True)
            report()
    host = _measure_host_overhead()
    first = None
    if ns.first_call:
        first = _measure_first_call(cases, rows, settings, _no_tune(policy))
    doc = report(host, first)
    plot_report(doc, png_path)
    print_report(doc, title=f"autocutlass bench on {dev.gpu_name}, policy {policy}; {json_path}, {png_path}")
    return 1 if any(r["status"] == "FAILED" for r in rows) else 0


def _no_tune(policy: str) -> str:
    """The policy for side measurements that must not start a tuning: 'tune' becomes 'cached'."""
    return "cached" if policy == "tune" else policy


def _measure_bandwidth(flush_bytes: int, flush_kind: str = "write") -> float:
    """TB/s of a device-to-device copy (bytes read + bytes written), timed by the protocol."""
    import torch

    from autocutlass.search.timing import time_callable

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    t = time_callable(lambda: dst.copy_(src), flush_bytes=flush_bytes, flush_kind=flush_kind)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / (t.median_ms * 1e-3) / 1e12


def _measure_case(case: BenchCase, vs: Sequence[str], rounds: int, flush_bytes: int, policy: str,
                  flush_kind: str = "write") -> Measured:
    """Verify autocutlass's first call on one case, then time every side ``rounds`` times."""
    import contextlib

    import torch

    import autocutlass
    from autocutlass.errors import CantImplement, KernelCompileError, UnsupportedProblem
    from autocutlass.search.timing import time_callable
    from autocutlass.ops.gemm.evaluation import check_output, fp32_matmul_precision, make_inputs, reference

    prob = case.problem
    precision = fp32_matmul_precision("tf32") if case.spec.tf32 else contextlib.nullcontext()
    with precision:
        x = make_inputs(prob, device="cuda", seed=0)
        a, b, d = x.a, x.b, x.d
        ref = reference(prob, x)
        x.poison()
        torch.cuda.synchronize()
        fp8 = prob.a_dtype is DType.E4M3
        sa, sb = x.scale_a, x.scale_b
        if fp8:  # autocutlass.scaled_mm against torch._scaled_mm (cuBLASLt), same scales

            # Both with fast accumulation (WGMMA accumulates across all of K): what the kernel does.
            def ours() -> object:
                return autocutlass.scaled_mm(a, b, sa, sb, out_dtype=d.dtype, out=d, use_fast_accum=True)

            def theirs() -> object:
                return torch._scaled_mm(a, b, sa, sb, out_dtype=d.dtype, use_fast_accum=True)
        else:

            def ours() -> object:
                return autocutlass.matmul(a, b, out=d)

            d_torch = torch.empty_like(d)

            def theirs() -> object:
                return torch.matmul(a, b, out=d_torch)

        before = autocutlass.stats().as_dict()
        t0 = time.perf_counter()
        try:
            ours()
            torch.cuda.synchronize()
        except (UnsupportedProblem, CantImplement, KernelCompileError) as e:  # AUTOCUTLASS_STRICT=1
            delta = stats_delta(before, autocutlass.stats().as_dict())
            return Measured(path="raised", stats_delta=delta, tune_or_lookup_s=time.perf_counter() - t0,
                            verified=False, error=f"{type(e).__name__}: {e}")  # fmt: skip
        first_s = time.perf_counter() - t0
        delta = stats_delta(before, autocutlass.stats().as_dict())
        ok, why = check_output(prob, d, ref)
        del ref
        path = first_call_path(delta, policy)
        if not ok:
            return Measured(path=path, stats_delta=delta, tune_or_lookup_s=first_s, verified=False, why=why)
        fns: dict[str, Callable[[], object]] = {"autocutlass": ours, "torch": theirs}
        compile_s = None
        if "compile" in vs and not fp8:
            fns["compile"], compile_s = _compiled_matmul(a, b)
        times: dict[str, list[float]] = {side: [] for side in fns}
        for r in range(rounds):
            order = list(fns) if r % 2 == 0 else list(reversed(fns))
            for side in order:
                times[side].append(time_callable(fns[side], flush_bytes=flush_bytes, flush_kind=flush_kind).median_ms)
    return Measured(path=path, stats_delta=delta, tune_or_lookup_s=first_s, verified=True, rounds_ms=times,
                    compile_first_call_s=compile_s)  # fmt: skip


def _mm(a: Any, b: Any) -> Any:
    import torch

    return torch.matmul(a, b)


def _compiled_matmul(a: Any, b: Any) -> tuple[Callable[[], object], float]:
    """torch.compile(max-autotune-no-cudagraphs) of a @ b for these operands, and its first call's wall time."""
    import torch

    torch._dynamo.reset()  # a fresh cache per case: no recompile limit, no reuse of another case's choice
    fn = torch.compile(_mm, mode=COMPILE_MODE, dynamic=False)
    t0 = time.perf_counter()
    fn(a, b)
    torch.cuda.synchronize()
    return (lambda: fn(a, b)), time.perf_counter() - t0


def _measure_host_overhead() -> dict[str, Any]:
    """Host time per call of a memo hit on a tiny problem against torch.matmul's, back to back.

    Under policy 'heuristic': the hit path does not depend on where its config came from, and a
    lookup under 'cached' would record the tiny problem as a miss to tune in the user's database.

    Rounds of ``HOST_OVERHEAD_CALLS / HOST_OVERHEAD_ROUNDS`` calls, the two alternating; each
    round is timed by the CPU clock from its first call until the last one returns (launches
    are asynchronous; a round is shorter than the launch queue, so it measures the host), and
    the GPU is synchronised between rounds. Per call: the median over rounds."""
    import torch

    import autocutlass

    m, n, k = HOST_OVERHEAD_SHAPE
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    per_round = HOST_OVERHEAD_CALLS // HOST_OVERHEAD_ROUNDS
    policy = "heuristic"
    with autocutlass.policy(policy):
        before = autocutlass.stats().as_dict()
        autocutlass.matmul(a, b)
        path = first_call_path(stats_delta(before, autocutlass.stats().as_dict()), policy)
        fns = {"autocutlass": lambda: autocutlass.matmul(a, b), "torch": lambda: torch.matmul(a, b)}
        for f in fns.values():
            for _ in range(50):
                f()
        us: dict[str, list[float]] = {side: [] for side in fns}
        for _ in range(HOST_OVERHEAD_ROUNDS):
            for side, f in fns.items():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(per_round):
                    f()
                us[side].append((time.perf_counter() - t0) / per_round * 1e6)
        torch.cuda.synchronize()
    ours, theirs = statistics.median(us["autocutlass"]), statistics.median(us["torch"])
    return {"shape": f"{m}x{n}x{k} bf16", "calls": HOST_OVERHEAD_CALLS, "rounds": HOST_OVERHEAD_ROUNDS,
            "policy": policy, "served_by": path, "autocutlass_us": ours, "torch_us": theirs,
            "overhead_us": ours - theirs, "rounds_us": us}  # fmt: skip


_FIRST_CALL_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import autocutlass, autocutlass.api
t2 = time.perf_counter()
spec = json.loads(sys.argv[1])
if spec["tf32"]:
    torch.backends.cuda.matmul.fp32_precision = "tf32"
dtype, out_dtype = getattr(torch, spec["dtype"]), getattr(torch, spec["out_dtype"])
a = torch.randn(spec["a_storage"], device="cuda").to(dtype)
b = torch.randn(spec["b_storage"], device="cuda").to(dtype)
a = a.transpose(-1, -2) if spec["a_transposed"] else a
b = b.transpose(-1, -2) if spec["b_transposed"] else b
d = torch.empty(spec["out_shape"], device="cuda", dtype=out_dtype)
torch.cuda.synchronize()
t3 = time.perf_counter()
autocutlass.matmul(a, b, out=d)
torch.cuda.synchronize()
t4 = time.perf_counter()
autocutlass.matmul(a, b, out=d)
torch.cuda.synchronize()
t5 = time.perf_counter()
kc = sys.modules.get("autocutlass.kernels.hopper_gemm.compile")
print(json.dumps({
    "import_torch_s": t1 - t0, "import_autocutlass_s": t2 - t1, "setup_s": t3 - t2,
    "first_call_s": t4 - t3, "second_call_s": t5 - t4, "stats": autocutlass.stats().as_dict(),
    "kernels_compiled": kc.STATS.compiled if kc else None, "kernels_from_disk": kc.STATS.disk_hits if kc else None,
}))
"""

def _measure_first_call(cases: Sequence[BenchCase], rows: Sequence[Mapping[str, Any]], settings: Any,
                        policy: str) -> dict[str, Any] | None:  # fmt: skip
    """The first call of one served case in fresh processes: with this process's database and
    kernel cache, and with the same database but empty kernel caches (ours and the DSL's)."""
    name = first_call_case(rows)
    if name is None:
        return {"case": None, "note": "not measured: autocutlass served no case"}
    case = next(c for c in cases if c.name == name)
    row = next(r for r in rows if r["name"] == name)
    import autocutlass

    source_root = str(Path(autocutlass.__file__).resolve().parents[1])  # the child imports this autocutlass
    pythonpath = os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH")) if p)
    base = {**os.environ, "PYTHONPATH": pythonpath, "AUTOCUTLASS_DB": settings.db_url,
            "AUTOCUTLASS_CACHE_DIR": str(settings.cache_dir), "AUTOCUTLASS_POLICY": policy}  # fmt: skip
    out: dict[str, Any] = {"case": name, "served_by_in_bench": row["path"], "policy": policy,
                           "has_db_record": row["path"] in ("tuned", "db"), "db": settings.db_url}  # fmt: skip
    out["warm_cache"] = _run_child(case.spec, base)
    with tempfile.TemporaryDirectory(prefix="autocutlass-bench-") as tmp:
        cold = {**base, "AUTOCUTLASS_CACHE_DIR": tmp, "CUTE_DSL_CACHE_DIR": str(Path(tmp) / "cute_dsl")}
        out["cold_cache"] = _run_child(case.spec, cold)
    return out


def _run_child(spec: OperandSpec, env: Mapping[str, str]) -> dict[str, Any]:
    try:
        r = subprocess.run([sys.executable, "-c", _FIRST_CALL_CHILD, json.dumps(spec.as_dict())], env=dict(env),
                           capture_output=True, text=True, timeout=FIRST_CALL_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"returncode": None, "error": f"timed out after {FIRST_CALL_TIMEOUT_S} s"}
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        return {"returncode": r.returncode, "error": r.stderr[-2000:]}
    try:
        return dict(json.loads(lines[-1]))
    except json.JSONDecodeError:
        return {"returncode": r.returncode, "error": f"unreadable child output: {lines[-1][:300]}"}
