"""Worker processes: a crash or a hang is a recorded state, the parent survives, workers restart;
a handler bug reaches the parent as WorkerError. Handlers are the fakes of ``_search_fakes``."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from _search_fakes import HARD_KEY, FakeFamily, MemorySink

from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.space import config_key
from autocutlass.search.tuner import tune_problem
from autocutlass.search.workers import CandidatePipeline, IsolatedWorker, WorkerError

ECHO = "_search_fakes:make_echo_handler"
P = GemmProblem(m=128, n=128, k=128)


@pytest.fixture
def echo() -> Any:
    w = IsolatedWorker(ECHO, name="echo", env={"CUDA_VISIBLE_DEVICES": "", "CUTE_DSL_ARCH": "sm_90a"})
    yield w
    w.close()


def test_worker_runs_in_another_process_with_its_environment(echo: IsolatedWorker) -> None:
    reply = echo.call({"x": 1}, timeout_s=30)
    assert reply.kind == "result" and reply.result is not None
    assert reply.result["echo"] == {"x": 1}
    assert reply.result["pid"] != os.getpid()
    assert reply.result["cuda_visible"] == "" and reply.result["arch"] == "sm_90a"


def test_crash_is_a_reply_and_the_worker_restarts(echo: IsolatedWorker) -> None:
    first = echo.call({}, timeout_s=30).result["pid"]  # type: ignore[index]
    reply = echo.call({"action": "exit"}, timeout_s=30)
    assert reply.kind == "died" and "exit code 7" in (reply.reason or "")
    again = echo.call({"x": 2}, timeout_s=30)
    assert again.kind == "result" and again.result["pid"] != first  # type: ignore[index]


def test_hang_times_out_kills_and_restarts(echo: IsolatedWorker) -> None:
    echo.call({}, timeout_s=30)  # started and ready: the timeout below is the request's alone
    t0 = time.monotonic()
    reply = echo.call({"action": "sleep", "seconds": 60}, timeout_s=1.0)
    assert reply.kind == "timeout" and time.monotonic() - t0 < 10
    assert echo.call({"x": 3}, timeout_s=30).kind == "result"


def test_handler_exception_is_a_bug_raised_in_the_parent(echo: IsolatedWorker) -> None:
    with pytest.raises(WorkerError, match="ZeroDivisionError"):
        echo.call({"action": "raise"}, timeout_s=30)
    assert echo.call({"x": 4}, timeout_s=30).kind == "result"


def test_bad_handler_spec_is_a_bug() -> None:
    w = IsolatedWorker("_search_fakes:no_such_factory", name="bad")
    try:
        with pytest.raises(WorkerError, match="AttributeError"):
            w.call({}, timeout_s=30)
    finally:
        w.close()


def fake_pipeline(**kw: Any) -> CandidatePipeline:
    return CandidatePipeline(
        "fake",
        compile_handler="_search_fakes:make_fake_compile_handler",
        bench_handler="_search_fakes:make_fake_bench_handler",
        **kw,
    )


def test_pipeline_maps_every_failure_to_a_state() -> None:
    modes = ["a", "crash", "b", "hang", "fault", "wrong", "compile_error", "hang_compile", "a2"]
    with fake_pipeline(compile_workers=2, compile_timeout_s=2.0, bench_timeout_s=2.0) as pipe:
        assert pipe.device()["device"]["gpu_name"] == HARD_KEY.gpu_name
        base = pipe.baseline(P)
        assert base.state == "ok" and base.timing is not None and base.timing.median_ms == 2.0
        for i, mode in enumerate(modes):
            params = {"tile": i, "mode": mode}
            pipe.submit(P, config_key(params), params)
        outcomes: dict[str, Any] = {}
        deadline = time.monotonic() + 120
        while pipe.in_flight and time.monotonic() < deadline:
            for o in pipe.poll(1.0):
                outcomes[o.params["mode"]] = o
        assert pipe.in_flight == 0
        states = {m: o.state for m, o in outcomes.items()}
        assert states == {
            "a": "ok", "b": "ok", "a2": "ok",
            "crash": "crash", "hang": "timeout", "fault": "crash", "wrong": "wrong_result",
            "compile_error": "compile_error", "hang_compile": "timeout",
        }  # fmt: skip
        assert "killed by" in outcomes["crash"].reason or "exit code 139" in outcomes["crash"].reason
        assert outcomes["a"].timing is not None and outcomes["a"].compile_s is not None
        # the benchmark child was replaced after each crash/hang and still serves
        assert pipe.baseline(P).state == "ok"


def test_tune_problem_over_real_worker_processes() -> None:
    """A family whose mode axis includes a crashing and a hanging candidate: the tuning finishes,
    records both as states, and the winner is an ok candidate."""
    fam = FakeFamily(tiles=(16, 32), stages=(1,), modes=("a", "crash", "hang"), seeds=[])
    sink = MemorySink()
    with fake_pipeline(compile_workers=1, bench_timeout_s=2.0) as pipe:
        r = tune_problem(P, fam, sink, exhaustive=True, evaluator=pipe)
    assert r.hard_key == HARD_KEY
    assert r.states == {"ok": 2, "crash": 2, "timeout": 2}
    assert r.best is not None and r.best.config["mode"] == "a" and r.best.config["tile"] == 16
    assert r.vs_torch == pytest.approx(2.0 / 1.016)
    assert len(sink.records) == 6


@pytest.mark.compile
def test_real_compile_handler_compiles_without_a_gpu(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU-blind compile child fills the on-disk kernel cache (needs the DSL, not a GPU)."""
    pytest.importorskip("cutlass")
    from autocutlass.kernels import get_family
    from autocutlass.ops.gemm.problem import Major
    from autocutlass.search.workers import COMPILE_HANDLER

    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    fam = get_family("hopper_gemm")
    p = GemmProblem(m=256, n=512, k=256, b_major=Major.COL)
    w = IsolatedWorker(COMPILE_HANDLER, name="compile", env={"CUDA_VISIBLE_DEVICES": "", "CUTE_DSL_ARCH": "sm_90a"})
    try:
        req = {"op": "compile", "family": fam.name, "problem": p.as_dict(), "config": fam.config_to_dict(fam.seeds(p)[0])}
        reply = w.call(req, timeout_s=300)
    finally:
        w.close()
    assert reply.kind == "result" and reply.result is not None, reply.reason
    assert reply.result["state"] == "ok", reply.result
    assert list(tmp_path.rglob("*.o")), "no compiled kernel in the cache"
