"""Dispatcher decisions with the kernel layer stubbed: memo, miss policies, miss recording,
database failures, fallbacks, strict mode, thread safety. CPU tensors play GPU tensors."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from _dispatch_fakes import FakeConfig, FakeStore, FakeTuner, Record, make_rig, calls
from autocutlass.ops.gemm import frontend as validate
from autocutlass.dispatch import POLICY_OVERRIDE, policy
from autocutlass.errors import CantImplement, KernelCompileError, UnsupportedProblem
from autocutlass.settings import Policy

BF = torch.bfloat16


def t(*shape: int, dtype: torch.dtype = BF) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def close(x: torch.Tensor, ref: torch.Tensor) -> None:
    torch.testing.assert_close(x.float(), ref.float(), atol=5e-2, rtol=2e-2)


# ---- memo --------------------------------------------------------------------------------
def test_second_call_is_a_memo_hit_without_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.HEURISTIC)
    d = rig.dispatcher
    a, b = t(32, 64), t(64, 48)
    close(calls(d).matmul(a, b), a @ b)
    plans = []
    monkeypatch.setattr(validate, "plan", lambda *x: plans.append(x) or pytest.fail("planned on a hit"))
    a2, b2 = t(32, 64), t(64, 48)  # new tensors, same metadata
    close(calls(d).matmul(a2, b2), a2 @ b2)
    s = d.stats()
    assert (s.memo_misses, s.memo_hits, s.compiles) == (1, 1, 1)
    assert len(rig.family.launches) == 2 and plans == []


def test_memo_key_separates_shape_alignment_and_policy() -> None:
    rig = make_rig(Policy.HEURISTIC)
    d = rig.dispatcher
    buf = t(32 * 64 + 8)
    calls(d).matmul(buf[: 32 * 64].view(32, 64), t(64, 48))
    calls(d).matmul(buf[4 : 4 + 32 * 64].view(32, 64), t(64, 48))  # 8-byte aligned: another entry (fallback)
    calls(d).matmul(t(33, 64), t(64, 48))
    with policy("off"):
        calls(d).matmul(t(32, 64), t(64, 48))
    s = d.stats()
    assert s.memo_misses == 4 and s.fallbacks == 1
    assert rig.family.compiled[0][1].m == 32 and len(rig.family.launches) == 2


def test_runner_is_shared_by_problems_of_one_kernel_class() -> None:
    rig = make_rig(Policy.HEURISTIC)
    for m in (16, 100, 3000):
        calls(rig.dispatcher).linear(t(m, 64), t(96, 64))
    assert rig.dispatcher.stats().compiles == 1 and len(rig.family.launches) == 3


# ---- policies ----------------------------------------------------------------------------
def test_tune_policy_uses_exact_record_without_tuning() -> None:
    rig = make_rig(Policy.TUNE)
    a, b = t(32, 64), t(64, 48)
    p = validate.plan(validate.Call(validate.Op.MATMUL, a, b), _ctx()).problem
    rig.store.records[p.key()] = Record("fake", {"tile": 64}, "exact")
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    assert rig.tuner.calls == [] and rig.misses() == []
    assert rig.family.launches[-1].config == FakeConfig(64)
    s = rig.dispatcher.stats()
    assert (s.db_lookups, s.db_hits, s.tunes, s.misses_recorded) == (2, 1, 0, 0)  # 2: the record, the vendor's


def test_tune_policy_accepts_bucket_but_tunes_over_nearest() -> None:
    rig = make_rig(Policy.TUNE, store=FakeStore(fallback=Record("fake", {"tile": 64}, "bucket")))
    calls(rig.dispatcher).linear(t(100, 64), t(96, 64))
    assert rig.tuner.calls == [] and rig.family.launches[-1].config == FakeConfig(64)

    rig = make_rig(Policy.TUNE, store=FakeStore(fallback=Record("fake", {"tile": 64}, "nearest")))
    calls(rig.dispatcher).linear(t(100, 64), t(96, 64))
    assert len(rig.tuner.calls) == 1 and rig.tuner.calls[0].m == 100
    assert rig.family.launches[-1].config == FakeConfig(256)  # the tuned winner runs
    assert [p.m for p in rig.misses()] == [100]  # recorded for `autocutlass tune --pending`


def test_tune_policy_falls_back_to_nearest_then_default_when_tuning_finds_nothing() -> None:
    rig = make_rig(Policy.TUNE, store=FakeStore(fallback=Record("fake", {"tile": 64}, "nearest")),
                   tuner=FakeTuner(result={}))  # fmt: skip
    calls(rig.dispatcher).linear(t(100, 64), t(96, 64))
    assert rig.family.launches[-1].config == FakeConfig(64)
    rig = make_rig(Policy.TUNE, tuner=FakeTuner(result={}))
    calls(rig.dispatcher).linear(t(100, 64), t(96, 64))
    assert rig.family.launches[-1].config == FakeConfig(128)  # seeds[0]


def test_cached_policy_never_tunes() -> None:
    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=Record("fake", {"tile": 256}, "nearest")))
    x, w = t(100, 64), t(96, 64)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert rig.tuner.calls == [] and rig.family.launches[-1].config == FakeConfig(256)

    rig = make_rig(Policy.CACHED)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert rig.tuner.calls == [] and rig.family.launches[-1].config == FakeConfig(128)
    assert len(rig.misses()) == 1 and rig.dispatcher.stats().misses_recorded == 1


class _SlowMisses(FakeStore):
    """A store whose miss writes wait for ``gate`` and note the thread they ran on."""

    def __init__(self, **kw) -> None:  # noqa: ANN003
        super().__init__(**kw)
        self.gate = threading.Event()
        self.threads: list[threading.Thread] = []

    def record_miss(self, problem, hard_key) -> None:  # noqa: ANN001
        self.threads.append(threading.current_thread())
        assert self.gate.wait(30)
        super().record_miss(problem, hard_key)


@pytest.mark.parametrize("pol", [Policy.CACHED, Policy.BACKGROUND])
def test_a_call_that_will_not_tune_does_not_wait_for_its_miss_write(pol: Policy) -> None:
    """cached and background serve at once: the miss (for tune --pending) is written on a thread of
    its own (a first write imports SQLAlchemy: up to a second); stats() waits for it."""
    store = _SlowMisses()
    rig = make_rig(pol, store=store)
    x, w = t(100, 64), t(96, 64)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())  # returned while the write waits
    assert rig.store.misses == [] and len(store.threads) == 1 and store.threads[0] is not threading.current_thread()
    store.gate.set()
    assert rig.dispatcher.stats().misses_recorded == 1 and [p.m for p in rig.store.misses] == [100]


_EXIT_CHILD = """
import sys, time, torch
from pathlib import Path
from _dispatch_fakes import FakeStore, make_rig, calls
from autocutlass.settings import Policy
class Slow(FakeStore):
    def record_miss(self, problem, hard_key):
        time.sleep(0.5)
        Path(sys.argv[1]).write_text(problem.describe())
rig = make_rig(Policy.CACHED, store=Slow())
calls(rig.dispatcher).linear(torch.randn(100, 64).to(torch.bfloat16), torch.randn(96, 64).to(torch.bfloat16))
"""


def test_interpreter_exit_waits_for_the_miss_writes(tmp_path: Path) -> None:
    flag = tmp_path / "written"
    here = Path(__file__).resolve().parent
    r = subprocess.run([sys.executable, "-c", _EXIT_CHILD, str(flag)], cwd=here, capture_output=True, text=True,
                       timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(here)})  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert flag.is_file() and "100x96x64" in flag.read_text()


def test_a_call_that_tunes_writes_its_miss_before_tuning_on_its_own_thread() -> None:
    store = _SlowMisses()
    store.gate.set()
    rig = make_rig(Policy.TUNE, store=store)
    x, w = t(100, 64), t(96, 64)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert store.threads == [threading.current_thread()] and len(rig.store.misses) == 1 and len(rig.tuner.calls) == 1


def test_a_far_nearest_record_serves_nothing_but_seeds_the_tuning() -> None:
    """A record tuned for 8192 rows must not serve a one-row call (it ran decode at half speed):
    the default serves and the miss is recorded; a near one serves under cached, and is recorded
    too, so that tune --pending tunes the problem itself."""
    x, w = t(1, 64), t(96, 64)
    probe = make_rig(Policy.CACHED)
    calls(probe.dispatcher).linear(x, w)
    mine = probe.store.lookups[0]
    far = Record("fake", {"tile": 256}, "nearest", problem=dataclasses.replace(mine, m=8192))
    near = Record("fake", {"tile": 256}, "nearest", problem=dataclasses.replace(mine, m=4))

    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=far))
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert rig.family.launches[-1].config == FakeConfig(128)  # seeds[0], not the far record
    assert len(rig.misses()) == 1 and rig.dispatcher.stats().db_hits == 0

    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=near))
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert rig.family.launches[-1].config == FakeConfig(256)
    assert len(rig.misses()) == 1 and rig.dispatcher.stats().db_hits == 1

    rig = make_rig(Policy.TUNE, store=FakeStore(fallback=far), tuner=FakeTuner(result={}))
    calls(rig.dispatcher).linear(x, w)
    assert rig.tuner.seeds and {"tile": 256} in rig.tuner.seeds[0]  # still the tuning's first guess
    assert rig.family.launches[-1].config == FakeConfig(128)  # tuning found nothing: the default


def test_heuristic_policy_never_reads_the_database() -> None:
    rig = make_rig(Policy.HEURISTIC, store=FakeStore(fallback=Record("fake", {"tile": 256}, "exact")))
    calls(rig.dispatcher).matmul(t(32, 64), t(64, 48))
    assert rig.store.lookups == [] and rig.tuner.calls == [] and rig.misses() == []
    assert rig.family.launches[-1].config == FakeConfig(128)


def test_off_policy_runs_torch_and_still_validates() -> None:
    rig = make_rig(Policy.OFF)
    a, b = t(32, 64), t(64, 48)
    assert torch.equal(calls(rig.dispatcher).matmul(a, b), a @ b)
    assert rig.family.compiled == [] and rig.store.lookups == [] and rig.dispatcher.stats().fallbacks == 0
    with pytest.raises(RuntimeError, match=r"\(32, 64\).*\(63, 48\)"):
        calls(rig.dispatcher).matmul(a, t(63, 48))
    with pytest.raises(RuntimeError, match="out= has shape"):
        calls(rig.dispatcher).matmul(a, b, out=t(32, 47))


def test_stale_or_foreign_records_are_ignored() -> None:
    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=Record("fake", {"tile": 96}, "exact")))
    calls(rig.dispatcher).matmul(t(32, 64), t(64, 48))  # tile=96 fails check: default instead
    assert rig.family.launches[-1].config == FakeConfig(128) and rig.dispatcher.stats().db_hits == 0
    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=Record("gone_family", {"tile": 64}, "exact")))
    calls(rig.dispatcher).matmul(t(32, 64), t(64, 48))
    assert rig.family.launches[-1].config == FakeConfig(128)


# ---- the policy context manager -------------------------------------------------------------
def test_policy_context_nests_and_restores() -> None:
    rig = make_rig(Policy.TUNE)
    d = rig.dispatcher
    with policy("heuristic"):
        with policy(Policy.OFF):
            calls(d).matmul(t(32, 64), t(64, 48))
            assert POLICY_OVERRIDE.get() is Policy.OFF
        assert rig.family.launches == []
        calls(d).matmul(t(32, 64), t(64, 48))
        assert rig.store.lookups == [] and len(rig.family.launches) == 1
    assert POLICY_OVERRIDE.get() is None
    calls(d).matmul(t(32, 64), t(64, 48))
    assert len(rig.tuner.calls) == 1  # back to the dispatcher's own policy: tune
    with pytest.raises(ValueError, match="not one of"):
        with policy("fast"):
            pass


def test_policy_context_is_per_thread() -> None:
    seen = []
    with policy("off"):
        th = threading.Thread(target=lambda: seen.append(POLICY_OVERRIDE.get()))
        th.start()
        th.join()
    assert seen == [None]


# ---- database failures degrade to a miss ------------------------------------------------------
def test_unopenable_database_behaves_as_miss(caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig(Policy.TUNE, open_error=True)
    x, w = t(32, 64), t(96, 64)
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        close(calls(rig.dispatcher).linear(x, w), x @ w.t())
        calls(rig.dispatcher).linear(t(40, 64), w)
    assert rig.tuner.calls == []  # nowhere to record a tuning: not tuned
    assert rig.family.launches[-1].config == FakeConfig(128)
    assert sum("tuning database unusable" in r.message for r in caplog.records) == 1


def test_failing_lookup_behaves_as_miss(caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig(Policy.CACHED, store=FakeStore(fail_lookup=True))
    x, w = t(32, 64), t(96, 64)
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        close(calls(rig.dispatcher).linear(x, w), x @ w.t())
        x2 = t(48, 64)
        close(calls(rig.dispatcher).linear(x2, w), x2 @ w.t())
    assert rig.family.launches[-1].config == FakeConfig(128) and len(rig.misses()) == 2
    assert sum("lookup failed" in r.message for r in caplog.records) == 1


# ---- fallbacks, strict, build failures --------------------------------------------------------
def test_unsupported_falls_back_with_one_log_line_per_reason(caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig(Policy.TUNE)
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        for m in (32, 33, 34):
            a, b = t(m, 64, dtype=torch.float64), t(64, 48, dtype=torch.float64)
            assert torch.equal(calls(rig.dispatcher).matmul(a, b), a @ b)
            calls(rig.dispatcher).matmul(a, b)
    assert sum("float64" in r.message for r in caplog.records) == 1
    assert rig.dispatcher.stats().fallbacks == 6 and rig.family.compiled == []


def test_family_refusal_falls_back() -> None:
    rig = make_rig(Policy.TUNE)
    buf = t(32 * 64 + 8)
    a = buf[1 : 1 + 32 * 64].view(32, 64)  # 2-byte aligned
    b = t(64, 48)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    assert rig.family.launches == [] and rig.dispatcher.stats().fallbacks == 1


def test_strict_raises_unsupported_with_reason() -> None:
    rig = make_rig(Policy.TUNE, strict=True, cc=(8, 0))
    with pytest.raises(UnsupportedProblem, match="cc 8.0"):
        calls(rig.dispatcher).matmul(t(32, 64), t(64, 48))
    with pytest.raises(UnsupportedProblem, match="float64"):
        calls(make_rig(Policy.TUNE, strict=True).dispatcher).matmul(t(32, 64, dtype=torch.float64), t(64, 48, dtype=torch.float64))


def test_compile_failure_falls_back_or_raises_under_strict() -> None:
    rig = make_rig(Policy.HEURISTIC)
    rig.family.compile_error = KernelCompileError("DSL exploded")
    a, b = t(32, 64), t(64, 48)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    assert rig.dispatcher.stats().fallbacks == 1
    strict = make_rig(Policy.HEURISTIC, strict=True)
    strict.family.compile_error = CantImplement("tile too big")
    with pytest.raises(CantImplement):
        calls(strict.dispatcher).matmul(a, b)


# ---- threads ---------------------------------------------------------------------------------
def test_concurrent_misses_tune_and_compile_once() -> None:
    rig = make_rig(Policy.TUNE, tuner=FakeTuner(delay_s=0.2))
    w = t(96, 64)
    xs = [t(32, 64) for _ in range(8)]
    results: list[torch.Tensor | None] = [None] * len(xs)

    def work(i: int) -> None:
        results[i] = calls(rig.dispatcher).linear(xs[i], w)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for x, r in zip(xs, results, strict=True):
        assert r is not None
        close(r, x @ w.t())
    s = rig.dispatcher.stats()
    assert (s.tunes, s.compiles, s.memo_misses) == (1, 1, 1)
    assert len(rig.tuner.calls) == 1 and len(rig.family.launches) == 8


def _ctx() -> validate.Context:
    from _dispatch_fakes import device_info

    return validate.Context(on_gpu=lambda t: True, device_info=lambda i: device_info(), grad=False, tf32=True)


def test_tuning_miss_inside_graph_capture_is_not_tuned_nor_memoised(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass import dispatch

    rig = make_rig(Policy.TUNE)
    a, b = t(32, 64), t(64, 48)
    monkeypatch.setattr(dispatch, "_capturing", lambda tensor: True)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    assert rig.tuner.calls == [] and rig.family.launches[-1].config == FakeConfig(128)
    monkeypatch.setattr(dispatch, "_capturing", lambda tensor: False)
    calls(rig.dispatcher).matmul(a, b)
    assert len(rig.tuner.calls) == 1 and rig.family.launches[-1].config == FakeConfig(256)
    assert rig.dispatcher.stats().memo_misses == 2


# ---- a shared database: one process tunes a problem, the others serve meanwhile -----------------
class ClaimingStore(FakeStore):
    """A sink with ``claim`` (as ``campaign.SharedTuningSink``): ``held`` means another process
    tunes the problem now (claim answers None); otherwise the claim is a context manager whose
    entry and exit are logged, so the test sees the tuning run inside it."""

    def __init__(self, held: bool) -> None:
        super().__init__()
        self.held = held
        self.events: list[str] = []

    def claim(self, problem, hard_key, *, gpu=None):  # noqa: ANN001, ANN201
        if self.held:
            return None
        store = self

        class Claim:
            def __enter__(self) -> None:
                store.events.append("claimed")

            def __exit__(self, *exc: object) -> None:
                store.events.append("released")

        return Claim()


def test_a_miss_another_process_tunes_is_served_meanwhile_and_looked_up_again(monkeypatch) -> None:  # noqa: ANN001
    from autocutlass import dispatch

    store = ClaimingStore(held=True)
    rig = make_rig(Policy.TUNE, store=store)
    a, b = t(32, 64), t(64, 48)
    calls(rig.dispatcher).matmul(a, b)
    assert rig.tuner.calls == [] and rig.dispatcher.stats().tunes == 0
    assert rig.family.launches[-1].config == FakeConfig(128)  # the family's default meanwhile
    calls(rig.dispatcher).matmul(a, b)  # within RECHECK_S: the stand-in stays memoised
    assert rig.dispatcher.stats().memo_misses == 1
    # the other process stores its winner; once the stand-in expires, the next call finds it
    store.records[rig.family.launches[-1].problem.key()] = Record("fake", {"tile": 64}, "exact")
    monkeypatch.setattr(dispatch, "RECHECK_S", 0.0)
    rig.dispatcher.clear()
    calls(rig.dispatcher).matmul(a, b)  # a stand-in memoised for 0 s
    calls(rig.dispatcher).matmul(a, b)  # expired: this call serves, and drops the entry
    calls(rig.dispatcher).matmul(a, b)  # misses again and finds the stored record
    assert rig.family.launches[-1].config == FakeConfig(64) and rig.tuner.calls == []


def test_a_claimed_miss_is_tuned_inside_the_claim() -> None:
    store = ClaimingStore(held=False)
    tuner = FakeTuner()
    original = tuner.__call__

    def tune(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        store.events.append("tuning")
        return original(*args, **kw)

    rig = make_rig(Policy.TUNE, store=store, tuner=tune)  # type: ignore[arg-type]
    calls(rig.dispatcher).matmul(t(32, 64), t(64, 48))
    assert store.events == ["claimed", "tuning", "released"]
    assert rig.family.launches[-1].config == FakeConfig(256) and rig.dispatcher.stats().tunes == 1


# ---- tuned-only families ---------------------------------------------------------------------
def _tuned_only_rig(pol: Policy, **kw) -> object:  # noqa: ANN003
    rig = make_rig(pol, **kw)
    rig.family.TUNED_ONLY = True  # type: ignore[attr-defined]
    return rig


@pytest.mark.parametrize("pol", [Policy.CACHED, Policy.TUNE])
def test_a_tuned_only_family_leaves_untuned_problems_to_torch(pol: Policy) -> None:
    """Where a stand-in config would run (the nearest problem's record under cached, the default
    after a tuning that found nothing, a sibling GPU's record), torch serves and the miss is
    recorded; this GPU's bucket record and a tuning's winner still run the family."""
    x, w = t(100, 64), t(96, 64)
    tuner = FakeTuner(result={}) if pol is Policy.TUNE else None
    for store in (FakeStore(fallback=Record("fake", {"tile": 256}, "nearest")), FakeStore(),
                  FakeStore(sibling=Record("fake", {"tile": 64}, "bucket", sibling=True))):  # fmt: skip
        rig = _tuned_only_rig(pol, store=store, tuner=tuner)
        close(calls(rig.dispatcher).linear(x, w), x @ w.t())
        s = rig.dispatcher.stats()
        assert rig.family.launches == [] and rig.family.compiled == []
        assert (s.torch_standins, s.db_hits, s.sibling_hits) == (1, 0, 0)
        assert [p.m for p in rig.misses()] == [100]
        close(calls(rig.dispatcher).linear(x, w), x @ w.t())  # memoised: no second look-up
        assert rig.dispatcher.stats().memo_hits == 1 and rig.family.launches == []
    rig = _tuned_only_rig(pol, store=FakeStore(fallback=Record("fake", {"tile": 64}, "bucket")), tuner=tuner)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert rig.family.launches[-1].config == FakeConfig(64) and rig.dispatcher.stats().torch_standins == 0


def test_a_tuned_only_family_runs_a_tunings_winner() -> None:
    rig = _tuned_only_rig(Policy.TUNE)
    x, w = t(100, 64), t(96, 64)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert len(rig.tuner.calls) == 1 and rig.family.launches[-1].config == FakeConfig(256)
    assert rig.dispatcher.stats().torch_standins == 0


def test_a_plain_family_still_runs_its_stand_ins() -> None:
    """The same stores without TUNED_ONLY: the nearest record and the default config run."""
    x, w = t(100, 64), t(96, 64)
    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=Record("fake", {"tile": 256}, "nearest")))
    calls(rig.dispatcher).linear(x, w)
    assert rig.family.launches[-1].config == FakeConfig(256) and rig.dispatcher.stats().torch_standins == 0


def test_a_tuned_only_stand_in_inside_a_capture_is_not_memoised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Torch stands in for a tuned-only family's miss inside a CUDA graph capture; the first call
    outside still tunes the problem and runs the winner (the stand-in was not memoised)."""
    from autocutlass import dispatch

    rig = _tuned_only_rig(Policy.TUNE)
    x, w = t(100, 64), t(96, 64)
    monkeypatch.setattr(dispatch, "_capturing", lambda tensor: True)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert rig.tuner.calls == [] and rig.family.launches == [] and rig.dispatcher.stats().torch_standins == 1
    monkeypatch.setattr(dispatch, "_capturing", lambda tensor: False)
    close(calls(rig.dispatcher).linear(x, w), x @ w.t())
    assert len(rig.tuner.calls) == 1 and rig.family.launches[-1].config == FakeConfig(256)
