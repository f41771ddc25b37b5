"""``campaign.SharedTuningSink``: the "one tunes, the others serve" claim a dispatcher calls on a
miss, the per-GPU lock, and arbitrated winners; on SQLite and (AUTOCUTLASS_TEST_PG_URL) PostgreSQL.

``test_concurrent_misses_tune_once`` plays the dispatcher's side of the hook: several threads
(standing for serving processes) miss one problem at once; exactly one tunes, the others serve
the best available config and find the tuned record on a later look."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _search_fakes import HARD_KEY, FakeEvaluator, FakeFamily
from test_queue_store import PG_ENV, reset_pg

from autocutlass.campaign.sink import SharedTuningSink
from autocutlass.db import TuningStore
from autocutlass.db.locks import FileLocks, locks_for
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.tuner import tune_problem

P = GemmProblem(m=256, n=512, k=256)
Q = GemmProblem(m=512, n=512, k=256)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.sqlite")
        return
    pg = os.environ.get(PG_ENV)
    if not pg:
        pytest.skip(f"{PG_ENV} is not set")
    reset_pg(pg)
    yield pg
    reset_pg(pg)


def sink(url: str, tmp_path: Path) -> SharedTuningSink:
    """A process's sink: its own lock objects over the database's locks and the host's GPU locks."""
    return SharedTuningSink(TuningStore(url), gpu_locks=FileLocks(tmp_path / "gpu-locks"), gpu_of=lambda i: f"gpu{i}")


def test_one_claim_per_problem_and_per_gpu(url: str, tmp_path: Path) -> None:
    a, b = sink(url, tmp_path), sink(url, tmp_path)
    claim = a.claim(P, HARD_KEY, device_index=0)
    assert claim is not None and claim.gpu == "gpu0"
    assert b.claim(P, HARD_KEY, device_index=1) is None  # another process tunes P: serve, look again later
    assert b.claim(Q, HARD_KEY, device_index=0) is None  # GPU 0 is timing P's candidates
    with b.claim(Q, HARD_KEY, device_index=1) as other:  # type: ignore[union-attr]
        assert other.gpu == "gpu1"
    claim.release()
    again = b.claim(P, HARD_KEY)
    assert again is not None
    again.release()
    b.store.record_best(P, HARD_KEY, "fake", {"tile": 16}, 1.0, 1.0)
    assert a.claim(P, HARD_KEY) is None  # tuned meanwhile: nothing to claim


def test_a_waiting_claim_gets_the_problem_when_released(url: str, tmp_path: Path) -> None:
    a, b = sink(url, tmp_path), sink(url, tmp_path)
    held = a.claim(P, HARD_KEY)
    assert held is not None
    got: list[Any] = []
    stop = threading.Event()
    t = threading.Thread(target=lambda: got.append(b.claim(P, HARD_KEY, gpu="gpu7", wait=stop)))
    t.start()
    time.sleep(0.6)
    assert t.is_alive()  # waiting for the problem's lock
    held.release()
    t.join(10)
    assert got and got[0] is not None and got[0].gpu == "gpu7"
    got[0].release()
    held = a.claim(P, HARD_KEY)
    t = threading.Thread(target=lambda: got.append(b.claim(P, HARD_KEY, wait=stop)))
    t.start()
    stop.set()  # a stopping worker gives up waiting
    t.join(10)
    assert got[-1] is None
    held.release()  # type: ignore[union-attr]


def test_a_bounded_claim_gives_up_on_a_lock_that_stays_taken(url: str, tmp_path: Path) -> None:
    """``wait_s``: a problem lock (or a GPU lock) still taken after that long raises
    ``ClaimTimeout`` (the holder may hang); a stop still answers None; a free lock is taken."""
    from autocutlass.campaign.sink import ClaimTimeout

    a, b = sink(url, tmp_path), sink(url, tmp_path)
    held = a.claim(P, HARD_KEY, gpu="gpu1")
    assert held is not None
    stop = threading.Event()
    t0 = time.monotonic()
    with pytest.raises(ClaimTimeout, match="stayed taken for 0.3 s"):
        b.claim(P, HARD_KEY, gpu="gpu2", wait=stop, wait_s=0.3)
    assert 0.25 < time.monotonic() - t0 < 5
    stop.set()
    assert b.claim(P, HARD_KEY, gpu="gpu2", wait=stop, wait_s=0.3) is None
    held.release()
    gpu_busy = a.claim(P, HARD_KEY, gpu="gpu1")  # the problem free, its GPU taken
    assert gpu_busy is not None
    gpu_busy._locks[0].release()  # the problem lock alone
    with pytest.raises(ClaimTimeout, match="GPU gpu1"):
        b.claim(P, HARD_KEY, gpu="gpu1", wait=threading.Event(), wait_s=0.3)
    gpu_busy.release()
    got = b.claim(P, HARD_KEY, gpu="gpu1", wait=threading.Event(), wait_s=0.3)
    assert got is not None
    got.release()


def _claim_and_sleep(url: str, lock_dir: str, ready: Any) -> None:
    s = SharedTuningSink(TuningStore(url), gpu_locks=FileLocks(lock_dir), gpu_of=lambda i: "gpu0")
    ready.put(s.claim(P, HARD_KEY) is not None)
    time.sleep(120)


def test_a_dead_claimer_leaves_nothing_behind(url: str, tmp_path: Path) -> None:
    TuningStore(url).check()  # create the tables before two processes race to
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    proc = ctx.Process(target=_claim_and_sleep, args=(url, str(tmp_path / "gpu-locks"), ready))
    proc.start()
    try:
        assert ready.get(timeout=60) is True
        s = sink(url, tmp_path)
        assert s.claim(P, HARD_KEY) is None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
        deadline = time.monotonic() + 30
        claim = None
        while claim is None and time.monotonic() < deadline:
            claim = s.claim(P, HARD_KEY)
            time.sleep(0.1)
        assert claim is not None
        claim.release()
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()


def test_record_best_keeps_the_faster(url: str, tmp_path: Path) -> None:
    s = sink(url, tmp_path)
    t1 = s.record_trial(P, HARD_KEY, "fake", {"tile": 16}, "ok", median_ms=1.0)
    s.record_best(P, HARD_KEY, "fake", {"tile": 16}, 1.0, 10.0, trial_id=t1)
    t2 = s.record_trial(P, HARD_KEY, "fake", {"tile": 32}, "ok", median_ms=1.2)
    s.record_best(P, HARD_KEY, "fake", {"tile": 32}, 1.2, 8.0, trial_id=t2)  # slower: not last-writer-wins
    best = s.store.lookup(P, HARD_KEY)
    assert best is not None and best.config == {"tile": 16} and best.median_ms == 1.0
    assert len(s.trials(P, HARD_KEY)) == 2 and s.finished_config_keys(P, HARD_KEY, "fake")
    s.record_best(P, HARD_KEY, "fake", {"tile": 64}, 0.9, 11.0)
    assert s.store.lookup(P, HARD_KEY).config == {"tile": 64}  # type: ignore[union-attr]


def test_torchs_time_follows_the_winner_kept(url: str, tmp_path: Path) -> None:
    """Two campaign tunings of one problem: each records its winner, then torch's time. The
    stored vendor record is the one timed with the winner kept (a verdict compares one tuning's
    times), not the faster of the two torch times."""
    from autocutlass.vendor import VENDOR_FAMILY, vendor_hard_key

    vk = vendor_hard_key(HARD_KEY, "2.11.0", "13.0")
    hk = vendor_hard_key(HARD_KEY, "2.11.0", "13.0", "heuristic")  # a variant's record follows alike
    first, second, third = sink(url, tmp_path), sink(url, tmp_path), sink(url, tmp_path)
    first.record_best(P, HARD_KEY, "fake", {"tile": 16}, 1.0, 10.0)
    first.record_best(P, vk, VENDOR_FAMILY, {}, 1.2, 8.0)  # ours ahead in this tuning
    first.record_best(P, hk, VENDOR_FAMILY, {}, 1.3, 7.5)
    second.record_best(P, HARD_KEY, "fake", {"tile": 32}, 1.1, 9.0)  # slower winner: kept out
    second.record_best(P, vk, VENDOR_FAMILY, {}, 0.5, 20.0)  # its torch times go with it
    second.record_best(P, hk, VENDOR_FAMILY, {}, 0.6, 19.0)

    def stored() -> tuple[float, ...]:
        return tuple(first.store.lookup(P, k).median_ms for k in (HARD_KEY, vk, hk))  # type: ignore[union-attr]

    assert stored() == (1.0, 1.2, 1.3)
    third.record_best(P, HARD_KEY, "fake", {"tile": 64}, 0.9, 11.0)  # a faster winner ...
    third.record_best(P, vk, VENDOR_FAMILY, {}, 1.4, 7.0)  # ... brings its own torch times, slower or not
    third.record_best(P, hk, VENDOR_FAMILY, {}, 1.5, 6.5)
    assert stored() == (0.9, 1.4, 1.5)


def test_concurrent_misses_tune_once(url: str, tmp_path: Path) -> None:
    """The dispatcher's side: ``claim`` on a miss; None -> serve the best available, look again later."""
    TuningStore(url).check()
    family = FakeFamily(smem=10_000)
    tunes: list[int] = []
    served: list[str] = []
    start = threading.Barrier(4)

    def serving_process(i: int) -> None:
        s = SharedTuningSink(TuningStore(url), problem_locks=locks_for(url), gpu_locks=FileLocks(tmp_path / "g"),
                             gpu_of=lambda index: f"gpu{i}")  # fmt: skip
        start.wait()
        claim = s.claim(P, HARD_KEY, device_index=0)
        if claim is None:
            served.append("default" if s.store.lookup(P, HARD_KEY) is None else "tuned")
            return
        with claim:
            tunes.append(i)
            ev = FakeEvaluator(lambda p: (time.sleep(0.05), 1.0 + p["tile"] / 1000)[1])
            tune_problem(P, family, s, trials=6, evaluator=ev, hard_key=HARD_KEY)

    threads = [threading.Thread(target=serving_process, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(tunes) == 1 and len(served) == 3
    best = TuningStore(url).lookup(P, HARD_KEY)
    assert best is not None and best.source == "exact"  # what the others find on their next look
    assert len(TuningStore(url).trials(P, HARD_KEY)) == 6
