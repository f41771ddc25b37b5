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

A conv2d case runs ``autocutlass.conv2d`` against ``F.conv2d`` with ``torch.backends.cudnn.benchmark``
True and False, ours once per mode as a user in that mode gets it (``_ConvSides``; each mode's two
sides on a thread of its own, ``OwnThread``); a grouped case ``autocutlass.grouped_mm`` against
``torch._grouped_mm`` and a loop of ``torch.matmul`` per expert, on the offsets of its routing
(``_GroupedSides``); the steps around the calls (each side of ours' first call and its
verification, the rounds) are the same for every op (``_measure_sides``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import datetime as dt
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, Self

from autocutlass.cli.bench.cases import BenchCase, Roofs, Spec
from autocutlass.cli.bench.plot import plot_report
from autocutlass.cli.bench.report import (
    FALLBACK_PATHS,
    STANDIN_PATH,
    VENDOR_PATH,
    Measured,
    OursCall,
    assemble_report,
    case_row,
    default_out_dir,
    first_call_case,
    first_call_path,
    memo_path,
    print_report,
    progress_line,
    side_paths,
    skipped_lines,
    stats_delta,
    write_json,
)
from autocutlass.cli.shapes import Skipped
from autocutlass.ops.gemm.problem import DType

HOST_OVERHEAD_SHAPE = (64, 64, 64)
HOST_OVERHEAD_CALLS = 2000
HOST_OVERHEAD_ROUNDS = 10
COPY_BYTES = 1 << 30
"""Size of the device-to-device copy that measures the bandwidth roof (each of source and destination)."""
FIRST_CALL_TIMEOUT_S = 900

COMPILE_MODE = "max-autotune-no-cudagraphs"


def run_bench(ns: argparse.Namespace, cases: Sequence[BenchCase], skipped: Sequence[Skipped] = ()) -> int:
    """Measure every case, the host overhead and the first call; write JSON and PNG; print.
    ``skipped``: the conv directions the shapes file lists that no kernel computes (reported)."""
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
                     "cudnn": torch.backends.cudnn.version(), "autocutlass": autocutlass.__version__},
        "settings": {"shapes": str(ns.shapes), "only": ns.only, "vs": list(ns.vs), "policy": policy,
                     "rounds": ns.rounds, "flush": ns.flush, "db": settings.db_url, "cache_dir": str(settings.cache_dir),
                     "tune_trials": settings.tune_trials, "tune_seconds": settings.tune_seconds},
    }  # fmt: skip
    json_path, png_path = out_dir / "bench.json", out_dir / "bench.png"
    rows: list[dict[str, Any]] = []

    def report(host: Mapping[str, Any] | None = None, first: Mapping[str, Any] | None = None) -> dict[str, Any]:
        doc = assemble_report(meta=meta, roofs=roofs, rows=rows, host_overhead=host, first_call=first, skipped=skipped)
        write_json(doc, json_path)
        return doc

    for line in skipped_lines({"skipped_directions": [dataclasses.asdict(s) for s in skipped]}):
        print(line, file=sys.stderr)
    served: dict[Any, tuple[str, str | None]] = {}  # (problem, side of ours) -> the latest case's (path, reason)
    with autocutlass.policy(policy):
        for i, case in enumerate(cases, 1):
            measured = None if case.skip else _measure_case(case, ns.vs, ns.rounds, flush, policy, ns.flush)
            if measured is not None:
                measured = _memo_paths(measured, case, served)
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


def _memo_paths(measured: Measured, case: BenchCase, served: dict[Any, tuple[str, str | None]]) -> Measured:
    """``report.memo_path`` for each side of ours of the case: a 'memo' first call serves what the
    latest earlier case of the problem served that side by (each side has memo entries of its own:
    conv2d's memo key holds the cuDNN mode). ``served``, (problem, side) -> (path, reason), is
    updated with this case's."""
    calls = measured.ours_calls(case.op)
    for side, call in calls.items():
        path, reason = memo_path(call.path, (case.problem, side), served)
        if path != call.path:
            calls[side] = call = dataclasses.replace(call, path=path, fallback_reason=reason)
        served[(case.problem, side)] = (call.path, call.fallback_reason)
    (_, first), *more = calls.items()
    return dataclasses.replace(measured, path=first.path, fallback_reason=first.fallback_reason, more_ours=dict(more))


def _no_tune(policy: str) -> str:
    """The policy for side measurements that must not start a tuning: 'tune' and 'background'
    become 'cached'."""
    return "cached" if policy in ("tune", "background") else policy


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
                  flush_kind: str = "write", *, device: str = "cuda") -> Measured:
    """Verify autocutlass's first call on one case, then time every side ``rounds`` times.
    ``device``: where the operands live ('cpu' in tests, where every call falls back to torch)."""
    sides = {"conv2d": _ConvSides, "grouped_mm": _GroupedSides}.get(case.op, _GemmSides)
    with sides.setup(case, device) as bench:
        return _measure_sides(bench, case, vs, rounds, flush_bytes, policy, flush_kind)


def _measure_sides(bench: _Sides, case: BenchCase, vs: Sequence[str], rounds: int, flush_bytes: int, policy: str,
                   flush_kind: str) -> Measured:  # fmt: skip
    """The op-independent steps: each side of ours' first call (stats delta, wall time, the warnings
    it logged) and its verification (and a second, re-poisoned one where the op asks for it), then
    the rounds. The first side's first call is the case's (it may tune; ``Measured.path`` and the
    fields beside it), the others' are ``Measured.more_ours``; a side that raises or computes a
    wrong result ends the case untimed, its error or wrong result named by the side where the op
    has several (conv2d: one per cuDNN mode, each served as a user in that mode is)."""
    import autocutlass
    from autocutlass.errors import CantImplement, KernelCompileError, UnsupportedProblem
    from autocutlass.ops.compare import synchronize
    from autocutlass.search.handlers import interleaved_rounds
    from autocutlass.search.timing import time_callable

    calls: dict[str, OursCall] = {}
    reasons: dict[str, str] = {}  # path -> why torch ran it, as this case's sides found it
    error: str | None = None  # what a side raised
    wrong: str | None = None  # why a side's result is wrong
    several = len(bench.ours) > 1  # then a side's error or wrong result is named by the side
    for side, ours in bench.ours.items():
        bench.poison()
        before = autocutlass.stats().as_dict()
        t0 = time.perf_counter()
        try:
            with _LoggedWarnings() as logged:
                out = ours()
                synchronize(out)
        except (UnsupportedProblem, CantImplement, KernelCompileError) as e:  # AUTOCUTLASS_STRICT=1
            delta = stats_delta(before, autocutlass.stats().as_dict())
            calls[side] = OursCall("raised", delta, time.perf_counter() - t0)
            error = f"{type(e).__name__}{f' ({side})' if several else ''}: {e}"
            break
        first_s = time.perf_counter() - t0
        delta = stats_delta(before, autocutlass.stats().as_dict())
        path = first_call_path(delta, policy)
        reason = None
        if path in FALLBACK_PATHS:
            # dispatch logs a reason once per process: a later side served the same way logs nothing
            if logged.messages or path not in reasons:
                reasons[path] = _fallback_reason(case, path, logged.messages)
            reason = reasons[path]
        ok, why = bench.check(out)
        if ok and bench.recheck:
            bench.poison()
            out = ours()
            synchronize(out)
            ok, why = bench.check(out)
        del out
        calls[side] = OursCall(path, delta, first_s, reason, bench.output_poisoned)
        if not ok:
            wrong = f"{side}: {why}" if several else why
            break
    bench.release_reference()
    (_, first), *more = calls.items()
    moved = getattr(bench, "bytes_moved", None)
    done: dict[str, Any] = {
        "path": first.path, "stats_delta": first.stats_delta, "tune_or_lookup_s": first.first_call_s,
        "fallback_reason": first.fallback_reason, "output_poisoned": first.output_poisoned, "bytes_moved": moved,
        "more_ours": dict(more),
    }  # fmt: skip
    if error is not None or wrong is not None:
        return Measured(**done, verified=False, error=error, why=wrong)
    fns, compile_s = bench.sides(vs)

    host: dict[str, list[float]] = {side: [] for side in fns}

    def timer(side: str, fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            def measure() -> Any:
                return time_callable(fn, flush_bytes=flush_bytes, flush_kind=flush_kind)

            t = fn.on_thread(measure) if isinstance(fn, OwnThread) else measure()
            if t.host_ms is not None:
                host[side].append(t.host_ms)
            return t.median_ms

        return run

    times = dict(zip(fns, interleaved_rounds([timer(side, fn) for side, fn in fns.items()], rounds), strict=True))
    return Measured(**done, verified=True, rounds_ms={side: list(ms or []) for side, ms in times.items()},
                    compile_first_call_s=compile_s,
                    host_ms={side: statistics.median(v) for side, v in host.items() if v})  # fmt: skip


class OwnThread:
    """A side called and timed on a thread of its own, started for one case and closed with it;
    ``same_thread`` gives more sides on that thread.

    For cuDNN's two modes (benchmark and default, i.e. heuristic). PyTorch keeps the execution plan it picked for a
    convolution in a ``thread_local`` cache (``benchmark_cache`` in
    ``aten/src/ATen/native/cudnn/Conv_v8.cpp``) whose key leaves ``cudnn.benchmark`` out: on a
    thread that has run a layer in benchmark mode, a call in default mode runs the benchmarked plan,
    and the other way round. Timed on the benchmark side's thread, "cuDNN default" read as benchmark
    mode (up to session 41). On a fresh thread of its own each mode's first call of the case picks
    its plan as a fresh process would: the default mode asks cuDNN's heuristic, benchmark mode times
    cuDNN's candidates. Ours in that mode runs on the same thread: where dispatch lets torch serve
    the layer (a vendor verdict, a fallback), it runs the plan a user in that mode has, the one the
    cuDNN side is timed with.

    The thread starts on the creating thread's CUDA device, and a call from another thread runs
    under that thread's ``autocutlass.policy`` override (dispatch keeps it per thread, and the
    memo key holds it): ours is served on the side's thread as it would be on the caller's."""

    def __init__(self, fn: Callable[[], object], name: str, device: str) -> None:
        import torch

        self._fn = fn
        where = torch.device(device)
        index = None  # the CUDA device current on the creating thread, unless ``device`` names one
        if where.type == "cuda" and torch.cuda.is_available():
            index = where.index if where.index is not None else torch.cuda.current_device()
        self._thread = _Thread(name, index)

    def same_thread(self, fn: Callable[[], object]) -> OwnThread:
        """A side that calls ``fn`` on this side's thread, closed with it (either's ``close``)."""
        side = copy.copy(self)  # shares the thread
        side._fn = fn
        return side

    @property
    def ident(self) -> int | None:
        """The thread's identity (None before its first call)."""
        return self._thread.ident

    def on_thread(self, work: Callable[[], Any]) -> Any:
        """``work()`` run on this side's thread (at once when called there), under the calling
        thread's policy override; its result or its exception."""
        if threading.get_ident() == self._thread.ident:
            return work()
        from autocutlass.dispatch import POLICY_OVERRIDE

        return self._thread.pool.submit(_under_policy, POLICY_OVERRIDE.policy, work).result()

    def __call__(self) -> object:
        return self.on_thread(self._fn)

    def close(self) -> None:
        self._thread.pool.shutdown(wait=True)


class _Thread:
    """The thread of one ``OwnThread`` and the sides that share it: a pool of one worker, started
    on ``index``, the CUDA device (None: none set)."""

    def __init__(self, name: str, index: int | None) -> None:
        self.ident: int | None = None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=self._start,
                                       initargs=(index,))  # fmt: skip

    def _start(self, index: int | None) -> None:
        import torch

        self.ident = threading.get_ident()
        if index is not None:
            torch.cuda.set_device(index)


def _under_policy(policy: Any, work: Callable[[], Any]) -> Any:
    """``work()`` with ``policy`` as this thread's override (``autocutlass.dispatch.POLICY_OVERRIDE``;
    None: the settings' policy), the thread's own restored after."""
    from autocutlass.dispatch import POLICY_OVERRIDE

    saved, POLICY_OVERRIDE.policy = POLICY_OVERRIDE.policy, policy
    try:
        return work()
    finally:
        POLICY_OVERRIDE.policy = saved


class _Sides(Protocol):
    """One case's sides on the GPU, for ``_measure_sides``."""

    recheck: bool
    """Verify a second call too (after poisoning again): where the first call's output may not
    land in poisoned memory (conv2d allocates its output; tuning may allocate before it)."""
    output_poisoned: bool | None
    ours: Mapping[str, Callable[[], Any]]
    """The sides of ours by name, in the order of their first calls: the primary baseline's first
    (``report.ours_sides``: its first call is the case's, which may tune). Each is verified;
    ``sides`` times them with the baselines."""

    def poison(self) -> None: ...
    def check(self, out: Any) -> tuple[bool, str | None]: ...
    def release_reference(self) -> None: ...
    def sides(self, vs: Sequence[str]) -> tuple[dict[str, Callable[[], object]], float | None]: ...


class _GemmSides:
    """``autocutlass.matmul(a, b, out=d)`` (fp8: ``scaled_mm`` with random per-tensor scales) on a
    NaN-poisoned ``d``; torch.matmul (fp8: torch._scaled_mm, both with fast accumulation: what the
    kernel does) and optionally torch.compile. fp32 cases under fp32 matmul precision 'tf32'."""

    recheck = False
    output_poisoned = None

    def __init__(self, case: BenchCase, device: str) -> None:
        import torch

        import autocutlass
        from autocutlass.ops.gemm.evaluation import make_inputs, reference

        self.problem = prob = case.problem
        x = make_inputs(prob, device=device, seed=0)
        self.inputs, self.ref = x, reference(prob, x)
        a, b, d = x.a, x.b, x.d
        sa, sb = x.scale_a, x.scale_b
        self.fp8 = prob.a_dtype is DType.E4M3
        self.ours: dict[str, Callable[[], Any]]
        if self.fp8:
            self.ours = {"autocutlass": lambda: autocutlass.scaled_mm(a, b, sa, sb, out_dtype=d.dtype, out=d,
                                                                      use_fast_accum=True)}  # fmt: skip
            self._torch = lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=d.dtype, use_fast_accum=True)
        else:
            d_torch = torch.empty_like(d)
            self.ours = {"autocutlass": lambda: autocutlass.matmul(a, b, out=d)}
            self._torch = lambda: torch.matmul(a, b, out=d_torch)

    @classmethod
    @contextlib.contextmanager
    def setup(cls, case: BenchCase, device: str) -> Iterator[_GemmSides]:
        from autocutlass.ops.gemm.evaluation import fp32_matmul_precision

        with fp32_matmul_precision("tf32") if case.spec.tf32 else contextlib.nullcontext():
            yield cls(case, device)

    def poison(self) -> None:
        from autocutlass.ops.compare import synchronize

        self.inputs.poison()
        synchronize(self.inputs.d)

    def check(self, out: Any) -> tuple[bool, str | None]:
        from autocutlass.ops.gemm.evaluation import check_output

        return check_output(self.problem, self.inputs.d, self.ref)

    def release_reference(self) -> None:
        self.ref = None

    def sides(self, vs: Sequence[str]) -> tuple[dict[str, Callable[[], object]], float | None]:
        fns: dict[str, Callable[[], object]] = {**self.ours, "torch": self._torch}
        compile_s = None
        if "compile" in vs and not self.fp8:
            fns["compile"], compile_s = _compiled_matmul(self.inputs.a, self.inputs.b)
        return fns, compile_s


class _ConvSides:
    """``autocutlass.conv2d(x, w, None, stride, padding, dilation, groups)`` on channels_last
    operands (``ops.conv.evaluation.make_inputs``; dgrad and wgrad: the dispatcher's
    ``conv2d_dgrad`` / ``conv2d_wgrad`` front-ends, what ``torch.ops.autocutlass.conv2d_dgrad``
    / ``conv2d_wgrad`` run in a backward, against ``aten.convolution_backward`` with that one output
    in its mask, what autograd runs) against ``F.conv2d`` with
    ``torch.backends.cudnn.benchmark`` True and False, ours timed in each mode too, as a user in
    that mode gets it: sides 'autocutlass_benchmark' and 'cudnn_benchmark' with the flag True,
    'autocutlass' and 'cudnn_default' with it False, each side setting the flag before its call.
    Ours cannot be timed once for both: the conv front-ends' memo key holds the flag, and a vendor
    verdict (the tuning measured cuDNN faster) is judged per mode (the front-ends' ``vendor_variant``:
    benchmark mode's record, or the ``heuristic`` one of PyTorch's default mode), so one mode's user
    may run cuDNN's plan where the other's runs our kernel. Each mode's two sides run on a thread of their own
    (``OwnThread``: PyTorch caches cuDNN's plans per thread, keyed without the flag): where dispatch
    lets torch serve ours, it runs the plan the cuDNN side of its mode runs, as on a user's thread.
    Benchmark mode's side of ours is called first, the primary baseline's (``report.ours_sides``):
    its first call is the case's, which may tune. conv2d allocates its output: ``poison`` fills a tensor of
    the output's size with NaN and frees it, so that the caching allocator hands that block to the
    next call's output (``output_poisoned`` records whether it did); each side of ours is verified
    so."""

    recheck = True

    def __init__(self, case: BenchCase, device: str) -> None:
        import torch
        import torch.nn.functional as F

        import autocutlass
        from autocutlass.ops.conv import evaluation

        from autocutlass.ops.conv.backward import CONV2D_DGRAD, CONV2D_WGRAD
        from autocutlass.ops.conv.problem import ConvDirection

        self.problem = p = case.problem
        self.spec = case.spec
        self.device = device
        x = evaluation.make_inputs(p, device=device, seed=0)
        self.ref = evaluation.reference(p, x)
        xs, ws, ys = x.x, x.w, x.y
        args = (None, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w), p.groups)
        cudnn = torch.backends.cudnn
        if p.direction is ConvDirection.FPROP:
            def call() -> object:
                return autocutlass.conv2d(xs, ws, *args)

            def baseline() -> object:
                return F.conv2d(xs, ws, *args)
        else:  # dY is ys; the computed tensor's buffer (xs or ws) is read by neither side
            fe, other = (CONV2D_DGRAD, ws) if p.direction is ConvDirection.DGRAD else (CONV2D_WGRAD, xs)
            grad_args = (list(case.spec.out_shape), [p.stride_h, p.stride_w], [p.pad_h, p.pad_w], [p.dil_h, p.dil_w],
                         p.groups)  # fmt: skip

            def call() -> object:
                return autocutlass.api.dispatcher().call(fe, ys, other, *grad_args)

            def baseline() -> object:
                return evaluation.convolution_backward(p, ys, xs, ws)

        def in_mode(benchmark: bool, fn: Callable[[], object]) -> Callable[[], object]:
            def run() -> object:
                cudnn.benchmark = benchmark
                return fn()

            return run

        # each cuDNN mode on a thread of its own, ours in that mode beside it: PyTorch's plan cache is per thread
        bench = OwnThread(in_mode(True, baseline), "cudnn-benchmark", device)
        default = OwnThread(in_mode(False, baseline), "cudnn-default", device)
        self.ours: dict[str, Callable[[], Any]] = {
            "autocutlass_benchmark": bench.same_thread(in_mode(True, call)),
            "autocutlass": default.same_thread(in_mode(False, call)),
        }
        self._cudnn = {"cudnn_benchmark": bench, "cudnn_default": default}
        self._poisoned_ptr: int | None = None
        self.output_poisoned: bool | None = None

    @classmethod
    @contextlib.contextmanager
    def setup(cls, case: BenchCase, device: str) -> Iterator[_ConvSides]:
        """cuDNN on, TF32 allowed for TF32 problems (``evaluation.baseline_context``); the caller's
        cuDNN flags are restored on exit."""
        import torch

        from autocutlass.ops.conv.evaluation import baseline_context

        torch.cuda.empty_cache()  # no cached block of the output's size but the one poison() frees
        with baseline_context(case.problem):
            sides = cls(case, device)
            try:
                yield sides
            finally:
                sides.close()

    def close(self) -> None:
        """The cuDNN modes' threads ended (ours ran on them too)."""
        for side in self._cudnn.values():
            side.close()

    def poison(self) -> None:
        import torch

        from autocutlass.ops.compare import synchronize

        y = torch.empty(self.spec.out_shape, dtype=getattr(torch, self.spec.out_dtype), device=self.device,
                        memory_format=torch.channels_last).fill_(math.nan)  # fmt: skip
        synchronize(y)
        self._poisoned_ptr = y.data_ptr()
        del y

    def check(self, out: Any) -> tuple[bool, str | None]:
        from autocutlass.ops.conv.evaluation import check_output

        self.output_poisoned = out.data_ptr() == self._poisoned_ptr
        return check_output(self.problem, out, self.ref)

    def release_reference(self) -> None:
        self.ref = None

    def sides(self, vs: Sequence[str]) -> tuple[dict[str, Callable[[], object]], float | None]:
        return {**self.ours, **self._cudnn}, None


class _PoisonedBlock:
    """Poisoning for ops that allocate their output: fill a tensor of the output's size with NaN
    and free it, so that the caching allocator hands that block to the next call's output;
    ``seen`` records whether it did."""

    def __init__(self, shape: Sequence[int], dtype: str, device: str, channels_last: bool = False) -> None:
        self.shape, self.dtype, self.device, self.channels_last = tuple(shape), dtype, device, channels_last
        self.ptr: int | None = None

    def poison(self) -> None:
        import torch

        from autocutlass.ops.compare import synchronize

        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        y = torch.empty(self.shape, dtype=getattr(torch, self.dtype), device=self.device,
                        memory_format=fmt).fill_(math.nan)  # fmt: skip
        synchronize(y)
        self.ptr = y.data_ptr()
        del y

    def seen(self, out: Any) -> bool:
        return bool(out.data_ptr() == self.ptr)


class _GroupedSides:
    """``autocutlass.grouped_mm(x, w, offs)`` on the operands of ``ops.grouped.evaluation.make_inputs``
    under the case's routing, against ``torch._grouped_mm(x, w, offs)`` and a loop of
    ``torch.matmul`` per expert (``evaluation.loop_baseline``: the routing's sizes read once, on
    the host, before timing). grouped_mm allocates its output: poisoned as conv2d's is
    (``_PoisonedBlock``). ``bytes_moved``: x, the output and the weights of the experts that got
    rows."""

    recheck = True

    def __init__(self, case: BenchCase, device: str) -> None:
        import torch

        import autocutlass
        from autocutlass.ops.grouped import evaluation

        self.problem = p = case.problem
        spec = case.spec
        x = evaluation.make_inputs(p, device=device, seed=0, routing=spec.routing)  # type: ignore[union-attr]
        self.ref = evaluation.reference(p, x)
        xs, ws, offs = x.x, x.w, x.offs
        self.ours: dict[str, Callable[[], Any]] = {"autocutlass": lambda: autocutlass.grouped_mm(xs, ws, offs)}
        self._theirs = {"grouped_mm": lambda: torch._grouped_mm(xs, ws, offs),
                        "loop": evaluation.loop_baseline(p, x)}  # fmt: skip
        sizes = evaluation.expert_sizes(p.t, p.experts, spec.routing)  # type: ignore[union-attr]
        used = sum(1 for n in sizes if n > 0)
        self.bytes_moved = (p.t * p.k * p.x_dtype.bytes + used * p.k * p.n * p.w_dtype.bytes
                            + p.t * p.n * p.out_dtype.bytes)  # fmt: skip
        self._block = _PoisonedBlock(spec.out_shape, spec.out_dtype, device)
        self.output_poisoned: bool | None = None

    @classmethod
    @contextlib.contextmanager
    def setup(cls, case: BenchCase, device: str) -> Iterator[_GroupedSides]:
        import torch

        if device != "cpu":
            torch.cuda.empty_cache()  # no cached block of the output's size but the one poison() frees
        yield cls(case, device)

    def poison(self) -> None:
        self._block.poison()

    def check(self, out: Any) -> tuple[bool, str | None]:
        from autocutlass.ops.grouped.evaluation import check_output

        self.output_poisoned = self._block.seen(out)
        return check_output(self.problem, out, self.ref)

    def release_reference(self) -> None:
        self.ref = None

    def sides(self, vs: Sequence[str]) -> tuple[dict[str, Callable[[], object]], float | None]:
        return {**self.ours, **self._theirs}, None


class _LoggedWarnings(logging.Handler):
    """Collects the messages the ``autocutlass`` logger emits at WARNING or above while entered
    (dispatch logs a fallback's reason there, once per reason and process)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> Self:
        logging.getLogger("autocutlass").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("autocutlass").removeHandler(self)


def _fallback_reason(case: BenchCase, path: str, logged: Sequence[str]) -> str:
    """Why torch ran ``case``: policy 'off', or what dispatch logged during the first call, or why
    no kernel family serves the problem; else that the reason was logged at an earlier case."""
    if path == "torch (policy off)":
        return "policy 'off'"
    if path == VENDOR_PATH:
        return "its tuning measured torch faster than our best kernel (vendor verdict; AUTOCUTLASS_VENDOR_VERDICTS=0 runs ours)"
    if path == STANDIN_PATH:
        return "not tuned on this GPU: torch stands in (a tuned-only family's miss, or a background tuning's)"
    if logged:
        return " | ".join(logged)
    from autocutlass.kernels import families_for, unsupported_reason

    if not families_for(case.problem):
        return f"no kernel family serves it: {unsupported_reason(case.problem)}"
    return "logged once per process by the autocutlass logger, at an earlier case with the same reason"


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
dtype, out_dtype = getattr(torch, spec["dtype"]), getattr(torch, spec["out_dtype"])
if spec.get("op") == "conv2d":
    if spec["tf32"]:
        torch.backends.cudnn.allow_tf32 = True
    cl = torch.channels_last
    x = torch.randn(spec["x_shape"], device="cuda").to(dtype).contiguous(memory_format=cl)
    w = torch.randn(spec["w_shape"], device="cuda").to(dtype).contiguous(memory_format=cl)
    args = (None, tuple(spec["stride"]), tuple(spec["padding"]), tuple(spec["dilation"]), spec["groups"])
    call = lambda: autocutlass.conv2d(x, w, *args)
    direction = spec.get("direction", "fprop")
    if direction != "fprop":
        from autocutlass.ops.conv.backward import CONV2D_DGRAD, CONV2D_WGRAD
        dy = torch.randn(spec["y_shape"], device="cuda").to(dtype).contiguous(memory_format=cl)
        fe, other = (CONV2D_DGRAD, w) if direction == "dgrad" else (CONV2D_WGRAD, x)
        grad_args = (spec["out_shape"], spec["stride"], spec["padding"], spec["dilation"], spec["groups"])
        call = lambda: autocutlass.api.dispatcher().call(fe, dy, other, *grad_args)
elif spec.get("op") == "grouped_mm":
    from autocutlass.ops.grouped.evaluation import offsets
    e, t = spec["w_storage"][0], spec["x_shape"][0]
    x = torch.randn(spec["x_shape"], device="cuda").to(dtype)
    w = torch.randn(spec["w_storage"], device="cuda").to(dtype)
    w = w.transpose(-2, -1) if spec["w_transposed"] else w
    offs = offsets(t, e, spec["routing"], device="cuda")
    call = lambda: autocutlass.grouped_mm(x, w, offs)
else:
    if spec["tf32"]:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
    a = torch.randn(spec["a_storage"], device="cuda").to(dtype)
    b = torch.randn(spec["b_storage"], device="cuda").to(dtype)
    a = a.transpose(-1, -2) if spec["a_transposed"] else a
    b = b.transpose(-1, -2) if spec["b_transposed"] else b
    d = torch.empty(spec["out_shape"], device="cuda", dtype=out_dtype)
    call = lambda: autocutlass.matmul(a, b, out=d)
torch.cuda.synchronize()
t3 = time.perf_counter()
call()
torch.cuda.synchronize()
t4 = time.perf_counter()
call()
torch.cuda.synchronize()
t5 = time.perf_counter()
kcs = [m for m in (sys.modules.get(f"autocutlass.kernels.{f}.compile") for f in ("hopper_gemm", "hopper_conv",
                                                                                  "hopper_conv_wgrad", "hopper_grouped")) if m]
print(json.dumps({
    "import_torch_s": t1 - t0, "import_autocutlass_s": t2 - t1, "setup_s": t3 - t2,
    "first_call_s": t4 - t3, "second_call_s": t5 - t4, "stats": autocutlass.stats().as_dict(),
    "kernels_compiled": sum(m.STATS.compiled for m in kcs) if kcs else None,
    "kernels_from_disk": sum(m.STATS.disk_hits for m in kcs) if kcs else None,
    "dsl_imported": "cutlass" in sys.modules, "optuna_imported": "optuna" in sys.modules,
}))
"""
"""A fresh process's first and second call of one case (``OperandSpec.as_dict()``,
``ConvOperandSpec.as_dict()`` (op 'conv2d') or ``GroupedOperandSpec.as_dict()`` (op 'grouped_mm')
in argv[1]); kernels compiled and loaded from disk are summed over the kernel families it imported;
whether it imported the CuTe DSL and Optuna (serving from the kernel cache needs neither).
``benchmarks/probes/cold_start.py`` breaks the first call down further."""

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
    # the child runs cuDNN's default mode: conv2d's side of ours in it is 'autocutlass', as GEMMs' only one
    in_bench = side_paths(row).get("autocutlass", row["path"])
    out: dict[str, Any] = {"case": name, "served_by_in_bench": in_bench, "policy": policy,
                           "has_db_record": row["path"] in ("tuned", "db", "sibling"), "db": settings.db_url}  # fmt: skip
    out["warm_cache"] = _run_child(case.spec, base)
    with tempfile.TemporaryDirectory(prefix="autocutlass-bench-") as tmp:
        cold = {**base, "AUTOCUTLASS_CACHE_DIR": tmp, "CUTE_DSL_CACHE_DIR": str(Path(tmp) / "cute_dsl")}
        out["cold_cache"] = _run_child(case.spec, cold)
    return out


def _run_child(spec: Spec, env: Mapping[str, str]) -> dict[str, Any]:
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
