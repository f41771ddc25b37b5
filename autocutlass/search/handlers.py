"""The real worker handlers: compile (GPU-blind) and benchmark (verify, then time, on the GPU).

They run inside ``autocutlass.search._child`` processes started by ``workers.CandidatePipeline``
and speak the request kinds listed in ``autocutlass.search.workers``. Failures a candidate may
legitimately have become states: ``CantImplement`` -> cant_implement, ``KernelCompileError`` ->
compile_error, a wrong or NaN output -> wrong_result, a CUDA fault -> crash (and this process
exits, since its CUDA context is lost). Any other exception is a bug and reaches the parent as
``WorkerError``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.problem import DType, Problem

Handler = Callable[[dict[str, Any]], dict[str, Any]]

DEFAULT_L2_BYTES = 64 * 1024 * 1024
"""Assumed L2 size when the device does not report one (H100: 50 MiB, H200: 60 MiB)."""


def _family(name: str) -> Any:
    from autocutlass.kernels import get_family

    return get_family(name)


def _compile(family: Any, config_dict: dict[str, Any], problem: Problem) -> tuple[Any | None, dict[str, Any]]:
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
        problem = Problem.from_dict(request["problem"])
        t0 = time.perf_counter()
        runner, failure = _compile(family, request["config"], problem)
        seconds = time.perf_counter() - t0
        if runner is None:
            return {**failure, "seconds": seconds}
        return {"state": "ok", "reason": None, "seconds": seconds}

    return handle


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

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        self._select_device(int(request.get("device", 0)))
        if op == "device":
            return self._device()
        if op == "bench":
            return self._bench(request)
        raise ValueError(f"benchmark worker got request {op!r}")

    def _select_device(self, index: int) -> None:
        import torch

        if torch.cuda.current_device() != index:
            torch.cuda.set_device(index)
            self._problem_key = None
            self._inputs = self._ref = None

    def _device(self) -> dict[str, Any]:
        from autocutlass.device import current_device

        import torch

        info = current_device(torch.cuda.current_device())
        return {"device": info.as_dict(), "hard_key": dataclasses.asdict(info.hard_key())}

    def _prepare(self, problem: Problem) -> None:
        import torch

        from autocutlass.device import current_device
        from autocutlass.search.verify import make_inputs, reference

        if self._problem_key == problem.key():
            return
        self._inputs = self._ref = None
        torch.cuda.empty_cache()
        self._inputs = make_inputs(problem, device=torch.device("cuda", torch.cuda.current_device()), seed=0)
        self._ref = reference(problem, self._inputs)
        torch.cuda.synchronize()
        l2 = current_device(torch.cuda.current_device()).l2_bytes or DEFAULT_L2_BYTES
        self._flush_bytes = 2 * l2
        self._problem_key = problem.key()

    def _bench(self, request: dict[str, Any]) -> dict[str, Any]:
        from autocutlass.search.timing import time_callable
        from autocutlass.search.verify import check_output, fp32_matmul_precision, torch_baseline, verify

        problem = Problem.from_dict(request["problem"])
        self._prepare(problem)
        inputs, ref = self._inputs, self._ref
        precision = "tf32" if problem.a_dtype is DType.TF32 else "ieee"
        try:
            if request["config"] is None:
                with fp32_matmul_precision(precision):
                    timing = time_callable(torch_baseline(problem, inputs), flush_bytes=self._flush_bytes)
                return {"state": "ok", "reason": None, "timing": timing.as_dict()}
            runner, failure = _compile(_family(request["family"]), request["config"], problem)
            if runner is None:
                return failure
            ok, reason = verify(runner, problem, inputs, ref)
            if not ok:
                return {"state": "wrong_result", "reason": reason, "timing": None}
            timing = time_callable(lambda: inputs.run(runner), flush_bytes=self._flush_bytes)
            ok, reason = check_output(problem, inputs.d, ref)
            if not ok:
                return {"state": "wrong_result", "reason": f"after timing: {reason}", "timing": None}
            return {"state": "ok", "reason": None, "timing": timing.as_dict()}
        except _fault_types() as e:
            return {"state": "crash", "reason": f"CUDA fault: {type(e).__name__}: {e}", "timing": None, "exit": True}


def make_bench_handler() -> Handler:
    return BenchHandler()
