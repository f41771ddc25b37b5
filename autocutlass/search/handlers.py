"""The real worker handlers: compile (GPU-blind) and benchmark (verify, then time, on the GPU).

They run inside ``autocutlass.search._child`` processes started by ``workers.CandidatePipeline``
and speak the request kinds listed in ``autocutlass.search.workers``. Failures a candidate may
legitimately have become states: ``CantImplement`` -> cant_implement, ``KernelCompileError`` ->
compile_error, a wrong or NaN output -> wrong_result, a CUDA fault -> crash (and this process
exits, since its CUDA context is lost). Any other exception is a bug and reaches the parent as
``WorkerError``.

The *finals* (``op: "final"``) time a few configs and torch head to head: each participant is
timed once per round, the rounds alternate the order (``round_order``), so that a clock or power
drift over the seconds the finals take lands on every participant alike instead of on whoever
runs last; a participant's result is the median of its per-round medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.ops.base import OpProblem
from autocutlass.ops.registry import evaluation_for, problem_from_dict
from autocutlass.vendor import MAIN_VARIANT

if TYPE_CHECKING:
    from autocutlass.search.timing import Timing

Handler = Callable[[dict[str, Any]], dict[str, Any]]

DEFAULT_L2_BYTES = 64 * 1024 * 1024
"""Assumed L2 size when the device does not report one (H100: 50 MiB, H200: 60 MiB)."""


def per_call(timing: Timing, inputs: Any) -> Timing:
    """``timing`` of one ``inputs.run`` as the time of one call: divided by the launches a run
    makes (``calls_per_run``: grouped GEMM inputs run several routings back to back)."""
    from autocutlass.search.timing import Timing

    calls = int(getattr(inputs, "calls_per_run", 1))
    if calls == 1:
        return timing
    host = None if timing.host_ms is None else timing.host_ms / calls
    return Timing(timing.median_ms / calls, timing.p20_ms / calls, timing.p80_ms / calls, timing.n, host)


def _family(name: str) -> Any:
    from autocutlass.kernels import get_family

    return get_family(name)


def _compile(family: Any, config_dict: dict[str, Any], problem: OpProblem) -> tuple[Any | None, dict[str, Any]]:
    """(runner, {}) or (None, failure reply)."""
    try:
        config = family.config_from_dict(config_dict)
        return family.compile(config, problem), {}
    except CantImplement as e:
        return None, {"state": "cant_implement", "reason": e.reason, "timing": None}
    except KernelCompileError as e:
        return None, {"state": "compile_error", "reason": str(e), "timing": None}


def make_compile_handler() -> Handler:
    """Compile requests: ``family.compile`` fills the on-disk kernel cache for the bench child."""

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] != "compile":
            raise ValueError(f"compile worker got request {request['op']!r}")
        family = _family(request["family"])
        problem = problem_from_dict(request["problem"])
        t0 = time.perf_counter()
        runner, failure = _compile(family, request["config"], problem)
        seconds = time.perf_counter() - t0
        if runner is None:
            return {**failure, "seconds": seconds}
        return {"state": "ok", "reason": None, "seconds": seconds}

    return handle


def round_order(n: int, r: int) -> list[int]:
    """The order in which participants ``0..n-1`` are timed in round ``r`` (from 0) of the finals:
    forward in even rounds, backward in odd ones, so that each participant's average position,
    and with it its share of any drift along a round, is the same."""
    order = list(range(n))
    return order if r % 2 == 0 else order[::-1]


def interleaved_rounds(timers: Sequence[Callable[[], float | None]], rounds: int) -> list[list[float] | None]:
    """Run ``rounds`` rounds of ``timers`` in ``round_order``; per timer, the milliseconds it
    returned in each round, or None once it returned None (a failure: it is dropped from the
    remaining rounds, and its caller knows why)."""
    if rounds < 1:
        raise ValueError(f"finals need at least one round, got {rounds}")
    results: list[list[float] | None] = [[] for _ in timers]
    for r in range(rounds):
        for i in round_order(len(timers), r):
            ms = results[i]
            if ms is None:
                continue
            t = timers[i]()
            if t is None:
                results[i] = None
            else:
                ms.append(t)
    return results


def _fault_types() -> tuple[type[BaseException], ...]:
    """Exception types that mean "the GPU faulted" (illegal address, launch failure, ...)."""
    import torch

    types: list[type[BaseException]] = [torch.AcceleratorError]
    try:
        from cutlass.base_dsl.common import DSLCudaRuntimeError
    except ImportError:
        pass
    else:
        types.append(DSLCudaRuntimeError)
    return tuple(types)


class BenchHandler:
    """Benchmark requests on this process's GPU. Inputs and the reference are built once per
    problem and reused by every candidate (and by torch), so all are timed on the same data."""

    def __init__(self) -> None:
        self._problem_key: str | None = None
        self._inputs: Any = None
        self._ref: Any = None
        self._flush_bytes = 0
        self._variant_threads: dict[str, ThreadPoolExecutor] = {}

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        self._select_device(int(request.get("device", 0)))
        if op == "device":
            return self._device()
        if op == "bench":
            return self._bench(request)
        if op == "final":
            return self._final(request)
        if op == "release":
            return self._release()
        raise ValueError(f"benchmark worker got request {op!r}")

    def _release(self) -> dict[str, Any]:
        """Free the problem's inputs and reference (a pool's child waiting for its next tuning)."""
        import torch

        self._problem_key = None
        self._inputs = self._ref = None
        torch.cuda.empty_cache()
        return {"state": "ok"}

    def _select_device(self, index: int) -> None:
        import torch

        if torch.cuda.current_device() != index:
            torch.cuda.set_device(index)
            self._problem_key = None
            self._inputs = self._ref = None

    def _device(self) -> dict[str, Any]:
        import torch

        from autocutlass.device import current_device

        return {"device": current_device(torch.cuda.current_device()).as_dict()}

    def _prepare(self, problem: OpProblem) -> None:
        import torch

        from autocutlass.device import current_device

        if self._problem_key == problem.key():
            return
        self._inputs = self._ref = None
        torch.cuda.empty_cache()
        ev = evaluation_for(problem)
        # An op whose record serves inputs of other shapes than its key says (grouped GEMM:
        # routings) times candidates on several (``make_search_inputs``).
        make = getattr(ev, "make_search_inputs", ev.make_inputs)
        self._inputs = make(problem, device=torch.device("cuda", torch.cuda.current_device()), seed=0)
        self._ref = ev.reference(problem, self._inputs)
        torch.cuda.synchronize()
        l2 = current_device(torch.cuda.current_device()).l2_bytes or DEFAULT_L2_BYTES
        self._flush_bytes = 2 * l2
        self._problem_key = problem.key()

    def _torch_timing(self, problem: OpProblem, variant: str = MAIN_VARIANT) -> Timing:
        """The op's torch baseline on the prepared inputs, timed like a candidate (taken again while
        disturbed: ``timing.steady``), under the op's baseline settings (TF32 for TF32 problems; cuDNN
        benchmark mode for convolutions), or those of one of its ``baseline_variants`` on that
        variant's own thread (``_on_variant_thread``)."""
        from autocutlass.search.timing import steady, time_callable

        ev = evaluation_for(problem)

        def timed() -> Timing:
            with ev.baseline_context(problem, variant) if variant else ev.baseline_context(problem):
                baseline = ev.torch_baseline(problem, self._inputs)
                return per_call(steady(lambda: time_callable(baseline, flush_bytes=self._flush_bytes)), self._inputs)

        return self._on_variant_thread(variant, timed) if variant else timed()

    def _on_variant_thread(self, variant: str, work: Callable[[], Timing]) -> Timing:
        """``work()`` on the thread of ``variant``, started on its first use and running that
        variant's baseline only, on this thread's CUDA device: torch's settings may pick a path per
        thread once and keep it (PyTorch caches the plan cuDNN picked for a layer per thread, keyed
        without ``cudnn.benchmark``), so each variant runs where no other ever ran."""
        import torch

        pool = self._variant_threads.get(variant)
        if pool is None:
            pool = self._variant_threads[variant] = ThreadPoolExecutor(max_workers=1,
                                                                       thread_name_prefix=f"torch-{variant}")  # fmt: skip
        index = torch.cuda.current_device() if torch.cuda.is_available() else None

        def there() -> Timing:
            if index is not None:
                torch.cuda.set_device(index)
            return work()

        return pool.submit(there).result()

    def _variants(self, problem: OpProblem) -> tuple[str, ...]:
        """The op's ``baseline_variants`` of ``problem`` (none where its evaluation has none)."""
        variants = getattr(evaluation_for(problem), "baseline_variants", None)
        return tuple(variants(problem)) if variants is not None else ()

    def _bench(self, request: dict[str, Any]) -> dict[str, Any]:
        """Compile, verify and time one candidate (its timing taken again while disturbed:
        ``timing.steady``), or torch's baseline for config None."""
        from autocutlass.search.timing import steady, time_callable

        problem = problem_from_dict(request["problem"])
        self._prepare(problem)
        inputs, ref = self._inputs, self._ref
        ev = evaluation_for(problem)
        try:
            if request["config"] is None:
                return {"state": "ok", "reason": None, "timing": self._torch_timing(problem).as_dict()}
            runner, failure = _compile(_family(request["family"]), request["config"], problem)
            if runner is None:
                return failure
            ok, reason = ev.verify(runner, problem, inputs, ref)
            if not ok:
                return {"state": "wrong_result", "reason": reason, "timing": None}
            timing = per_call(steady(lambda: time_callable(lambda: inputs.run(runner), flush_bytes=self._flush_bytes)),
                              inputs)  # fmt: skip
            ok, reason = ev.check_output(problem, inputs.output, ref)
            if not ok:
                return {"state": "wrong_result", "reason": f"after timing: {reason}", "timing": None}
            return {"state": "ok", "reason": None, "timing": timing.as_dict()}
        except _fault_types() as e:
            return {"state": "crash", "reason": f"CUDA fault: {type(e).__name__}: {e}", "timing": None, "exit": True}

    # ---- finals -----------------------------------------------------------------------------
    def _final(self, request: dict[str, Any]) -> dict[str, Any]:
        """Verify every config, then time them and torch in interleaved rounds (module doc)."""
        from autocutlass.search.timing import summarize

        problem = problem_from_dict(request["problem"])
        self._prepare(problem)
        family = _family(request["family"])
        verify = evaluation_for(problem).verify
        entries: list[dict[str, Any]] = [
            {"state": "ok", "reason": None, "timing": None, "round_ms": []} for _ in request["configs"]
        ]
        hosts: list[list[float]] = [[] for _ in range(len(request["configs"]) + 1)]  # per round; torch last
        try:
            timers: list[Callable[[], float | None]] = []
            owners: list[int] = []
            for i, config in enumerate(request["configs"]):
                runner, failure = _compile(family, config, problem)
                if runner is None:
                    entries[i].update(state=failure["state"], reason=failure["reason"])
                    continue
                ok, reason = verify(runner, problem, self._inputs, self._ref)
                if not ok:
                    entries[i].update(state="wrong_result", reason=reason)
                    continue
                timers.append(partial(self._time_finalist, runner, problem, entries[i], hosts[i]))
                owners.append(i)

            variants = self._variants(problem)
            torch_hosts: list[list[float]] = [hosts[-1], *([] for _ in variants)]

            def torch_round(variant: str, host: list[float]) -> float:
                timing = self._torch_timing(problem, variant)
                if timing.host_ms is not None:
                    host.append(timing.host_ms)
                return timing.median_ms

            n_ours = len(timers)
            timers += [partial(torch_round, v, h) for v, h in zip((MAIN_VARIANT, *variants), torch_hosts, strict=True)]
            per_timer = interleaved_rounds(timers, int(request["rounds"]))
        except _fault_types() as e:
            return {"state": "crash", "reason": f"CUDA fault: {type(e).__name__}: {e}", "entries": None,
                    "torch": None, "exit": True}  # fmt: skip
        for i, ms in zip(owners, per_timer[:n_ours], strict=True):
            if ms is not None:
                entries[i].update(timing=summarize(ms, _median(hosts[i])).as_dict(), round_ms=ms)
        torch_sides = []
        for ms, host in zip(per_timer[n_ours:], torch_hosts, strict=True):
            ms = ms or []
            torch_sides.append({"timing": summarize(ms, _median(host)).as_dict() if ms else None, "round_ms": ms})
        return {"state": "ok", "entries": entries, "torch": torch_sides[0],
                "torch_variants": dict(zip(variants, torch_sides[1:], strict=True))}

    def _time_finalist(self, runner: Any, problem: OpProblem, entry: dict[str, Any], host: list[float]
                       ) -> float | None:  # fmt: skip
        """One round of one finalist: its median ms (its host time appended to ``host``), or None
        (and ``entry`` says why) when what it wrote is wrong. D is poisoned first, since the
        previous participant left a correct D."""
        from autocutlass.search.timing import time_callable

        inputs = self._inputs
        inputs.poison()
        timing = per_call(time_callable(lambda: inputs.run(runner), flush_bytes=self._flush_bytes), inputs)
        ok, reason = evaluation_for(problem).check_output(problem, inputs.output, self._ref)
        if not ok:
            entry.update(state="wrong_result", reason=f"after timing: {reason}", timing=None, round_ms=[])
            return None
        if timing.host_ms is not None:
            host.append(timing.host_ms)
        return float(timing.median_ms)


def _median(values: list[float]) -> float | None:
    """The median of the rounds' host times, None for none."""
    return statistics.median(values) if values else None


def make_bench_handler() -> Handler:
    return BenchHandler()
