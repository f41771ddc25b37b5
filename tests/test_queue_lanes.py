"""``search.lanes``: two GPU lanes (a benchmark child each, with its own CUDA_VISIBLE_DEVICES)
sharing one pool of compile children, tuning two problems at once from two threads; the fake
handlers of ``_search_fakes`` stand in for the compiler and the GPU."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _search_fakes import HARD_KEY, FakeFamily, make_fake_bench_handler

from autocutlass.db import TuningStore
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.lanes import CompilePool, GpuLane
from autocutlass.search.tuner import TuneResult, tune_problem
from autocutlass.search.workers import CRASH

COMPILE = "_search_fakes:make_fake_compile_handler"
BENCH = "test_queue_lanes:make_visible_bench_handler"


def make_visible_bench_handler() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The fake benchmark handler; its device reply also says which GPU the child was given."""
    inner = make_fake_bench_handler()

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        reply = inner(req)
        if req["op"] == "device":
            reply["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
            reply["pid"] = os.getpid()
        return reply

    return handle


@pytest.fixture
def lanes() -> Iterator[tuple[CompilePool, list[GpuLane]]]:
    pool = CompilePool(2, compile_handler=COMPILE, start_timeout_s=60)
    made = [GpuLane(pool, visible, bench_handler=BENCH, start_timeout_s=60) for visible in ("3", "5")]
    pool.start()
    for lane in made:
        lane.start()
    try:
        yield pool, made
    finally:
        for lane in made:
            lane.close()
        pool.close()


def test_two_lanes_share_the_compile_children(lanes: tuple[CompilePool, list[GpuLane]], tmp_path: Path) -> None:
    pool, (a, b) = lanes
    family = FakeFamily(tiles=(16, 32, 64, 128), stages=(1, 2), modes=("a", "b", "compile_error"), smem=10_000)
    devices = [lane.evaluator("fake").device() for lane in (a, b)]
    assert [d["visible"] for d in devices] == ["3", "5"] and devices[0]["pid"] != devices[1]["pid"]
    assert pool.size == 2 and pool.share() == 1 and a.evaluator("fake").capacity == 2

    store = TuningStore(tmp_path / "t.sqlite")
    results: dict[str, TuneResult] = {}
    problems = {"3": GemmProblem(m=256, n=256, k=256), "5": GemmProblem(m=512, n=256, k=256)}

    def run(lane: GpuLane) -> None:
        results[lane.visible or ""] = tune_problem(problems[lane.visible or ""], family, store, exhaustive=True,
                                                   evaluator=lane.evaluator("fake"), hard_key=HARD_KEY)  # fmt: skip

    threads = [threading.Thread(target=run, args=(lane,)) for lane in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert set(results) == {"3", "5"}
    for visible, r in results.items():
        assert r.evaluated == r.feasible == 24
        assert r.states == {"ok": 16, "compile_error": 8}  # compile failures come back to their own lane
        assert r.best is not None and r.best.config["tile"] == 16  # fake timing: 1 + tile/1000 ms
        assert len(store.trials(problems[visible], HARD_KEY)) == 24
    assert a.evaluator("fake").in_flight == 0 and pool.pending(a.lane) == pool.pending(b.lane) == 0


def test_a_reset_lane_forgets_what_was_in_flight(lanes: tuple[CompilePool, list[GpuLane]]) -> None:
    a = lanes[1][0]
    ev = a.evaluator("fake")
    p = GemmProblem(m=256, n=256, k=256)
    for tile in (16, 32, 64, 128):
        ev.submit(p, f"k{tile}", {"tile": tile, "stages": 1, "mode": "a"})
    ev.poll(0.05)
    a.reset()  # the tuning was abandoned: nothing of it may reach the next one
    assert ev.in_flight == 0
    assert ev.baseline(p).state == "ok"  # the benchmark child restarts
    ev.submit(p, "crash", {"tile": 16, "stages": 1, "mode": "crash"})
    out = []
    while ev.in_flight:
        out += ev.poll(5)
    assert [(o.key, o.state) for o in out] == [("crash", CRASH)]
