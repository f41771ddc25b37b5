"""A bucket record whose config its family does not expect to fit the problem looked up
(``KernelFamily.fits``) is a stand-in, not a hit (a nearest record likewise gives way): ``tune`` tunes the problem, ``cached`` records
the miss and serves torch while vendor verdicts apply, ``background`` serves torch while it tunes.
And the GEMM family's rule (``hopper_gemm.picks.fits``): its wave model's verdict on M."""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

import pytest
import torch
from _dispatch_fakes import FakeConfig, FakeStore, FakeTuner, Record, calls, device_info, make_rig

from autocutlass.background import BackgroundTuner
from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C
from autocutlass.kernels.hopper_gemm import HopperGemmFamily, Schedule
from autocutlass.kernels.hopper_gemm.picks import BUCKET_FIT_TOLERANCE, config_cost, fits, modelled_best
from autocutlass.ops.gemm import frontend as validate
from autocutlass.ops.gemm.problem import GemmProblem, Major
from autocutlass.settings import Policy

BF = torch.bfloat16
INFO = device_info()


def t(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(BF)


def close(x: torch.Tensor, ref: torch.Tensor) -> None:
    torch.testing.assert_close(x.float(), ref.float(), atol=5e-2, rtol=2e-2)


def _problem(a: torch.Tensor, b: torch.Tensor) -> GemmProblem:
    ctx = validate.Context(on_gpu=lambda x: True, device_info=lambda i: INFO, grad=False, tf32=True)
    return validate.plan(validate.Call(validate.Op.MATMUL, a, b), ctx).problem


def _bucket_rig(pol: Policy, *, misfit: bool, **kw: Any):  # noqa: ANN202
    """A rig whose store holds only a bucket record of M = 120 (tile 64), for calls of M = 100."""
    b = t(64, 48)
    rig = make_rig(pol, store=FakeStore(fallback=Record("fake", {"tile": 64}, "bucket", problem=_problem(t(120, 64), b))),
                   **kw)  # fmt: skip
    rig.family.misfit = misfit
    return rig, t(100, 64), b


# ---- dispatch ------------------------------------------------------------------------------------
@pytest.mark.parametrize("misfit", [False, True])
def test_tune_policy_tunes_a_problem_its_bucket_record_does_not_fit(misfit: bool) -> None:
    rig, a, b = _bucket_rig(Policy.TUNE, misfit=misfit)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    s = rig.dispatcher.stats()
    if not misfit:  # a hit, as before
        assert rig.tuner.calls == [] and rig.family.launches[-1].config == FakeConfig(64)
        assert (s.misfits, s.db_hits, s.misses_recorded) == (0, 1, 0)
    else:  # tuned now, the bucket's config among the seeds; the winner runs
        assert [p.m for p in rig.tuner.calls] == [100] and {"tile": 64} in rig.tuner.seeds[0]
        assert rig.family.launches[-1].config == FakeConfig(256)
        assert s.misfits >= 1 and [p.m for p in rig.misses()] == [100]


@pytest.mark.parametrize("verdicts", [True, False])
def test_cached_policy_serves_torch_where_the_bucket_record_does_not_fit(verdicts: bool) -> None:
    rig, a, b = _bucket_rig(Policy.CACHED, misfit=True)
    rig.dispatcher.settings = dataclasses.replace(rig.dispatcher.settings, vendor_verdicts=verdicts)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)  # memoised
    s = rig.dispatcher.stats()
    assert rig.tuner.calls == [] and [p.m for p in rig.misses()] == [100] and s.memo_misses == 1
    if verdicts:  # torch, never counted as a fallback
        assert (len(rig.family.launches), s.vendor_hits, s.fallbacks, s.db_hits) == (0, 1, 0, 0)
    else:  # verdicts off: the record's config, as a stand-in
        assert [x.config for x in rig.family.launches] == [FakeConfig(64)] * 2 and s.vendor_hits == 0


def test_cached_policy_keeps_a_bucket_record_that_fits() -> None:
    rig, a, b = _bucket_rig(Policy.CACHED, misfit=False)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    s = rig.dispatcher.stats()
    assert rig.family.launches[-1].config == FakeConfig(64) and (s.vendor_hits, s.misfits, s.db_hits) == (0, 0, 1)
    assert rig.misses() == []


@pytest.mark.parametrize("misfit", [False, True])
def test_cached_policy_judges_a_nearest_record_alike(misfit: bool) -> None:
    """A nearest record (another bucket) serves ``cached`` as a stand-in where it fits, and gives
    way to torch where it does not; the miss is recorded either way."""
    b = t(64, 48)
    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=Record("fake", {"tile": 64}, "nearest",
                                                                  problem=_problem(t(400, 64), b))))  # fmt: skip
    rig.family.misfit = misfit
    a = t(100, 64)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    s = rig.dispatcher.stats()
    assert [p.m for p in rig.misses()] == [100] and rig.tuner.calls == []
    assert (len(rig.family.launches), s.vendor_hits, s.misfits) == ((0, 1, 1) if misfit else (1, 0, 0))


def test_the_misfit_is_logged_once_per_problem(caplog: pytest.LogCaptureFixture) -> None:
    rig, a, b = _bucket_rig(Policy.CACHED, misfit=True)
    with caplog.at_level(logging.INFO, logger="autocutlass"):
        calls(rig.dispatcher).matmul(a, b)
        rig.dispatcher.clear()
        calls(rig.dispatcher).matmul(a, b)
    lines = [r.getMessage() for r in caplog.records if "a stand-in, not a hit" in r.getMessage()]
    assert len(lines) == 1 and "gemm 120x48x64" in lines[0] and "fit gemm 100x48x64" in lines[0]


class _GatedTuner(FakeTuner):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def __call__(self, problem, family, sink, hard_key, device_index, settings, *, seeds=(), stop=None):  # noqa: ANN001
        while not self.gate.wait(0.01):
            if stop is not None and stop.is_set():
                return None
        return super().__call__(problem, family, sink, hard_key, device_index, settings, seeds=seeds, stop=stop)


def test_background_policy_serves_torch_while_it_tunes_a_misfit() -> None:
    gated = _GatedTuner()
    rig, a, b = _bucket_rig(Policy.BACKGROUND, misfit=True, tuner=gated)
    bg = BackgroundTuner(name="test-bucket-fit-tuner")
    rig.dispatcher._background = bg
    try:
        w = b
        with_kernel = t(120, 64)  # the record's own problem: a hit, so its kernel is loaded
        calls(rig.dispatcher).matmul(with_kernel, w)
        assert len(rig.family.launches) == 1
        close(calls(rig.dispatcher).matmul(a, w), a @ w)
        assert len(rig.family.launches) == 1 and rig.dispatcher.stats().torch_standins == 1  # torch, not the misfit
        gated.gate.set()
        assert rig.dispatcher.wait_background(10)
        calls(rig.dispatcher).matmul(a, w)
        assert rig.family.launches[-1].config == FakeConfig(256) and [p.m for p in gated.calls] == [100]
    finally:
        gated.gate.set()
        assert bg.shutdown(10)


# ---- the GEMM family's rule ----------------------------------------------------------------------
def _g(m: int, n: int = 3072, k: int = 4096) -> GemmProblem:
    return GemmProblem(m=m, n=n, k=k, b_major=Major.COL)


def test_a_gemm_config_does_not_fit_an_m_that_adds_a_wave() -> None:
    """2304x3072x4096's 128x224 tiles in a 1x2 cluster: 18 x 14 = 252 tiles, two waves of 132 SMs,
    within 3% of the model's cheapest there; M = 2200 keeps them (18 tile rows still); M = 2433 and
    2560 (same bucket) make 20 x 14 = 280, a third wave 12% full. M = 2100 keeps two waves too, but
    there 192x256 tiles fill one wave exactly (11 x 12 = 132): the record's config is 22% off the
    model's cheapest, and the problem is tuned rather than served by it."""
    cfg = C(128, 224, 64, cluster_n=2)
    tuned = _g(2304)
    assert fits(cfg, tuned, tuned) and fits(cfg, tuned, _g(2200))
    assert not fits(cfg, tuned, _g(2560)) and not fits(cfg, tuned, _g(2433)) and not fits(cfg, tuned, _g(2100))
    fam = HopperGemmFamily()
    assert fam.fits(cfg, tuned, _g(2200)) and not fam.fits(cfg, tuned, _g(2560))


def test_a_gemm_config_fits_where_its_waves_fill_no_worse_than_the_tolerance() -> None:
    """The comparison is relative to the model's cheapest config of each M: a config tuned where it
    filled its waves badly fits an M where it fills them better, and the boundary is the tolerance."""
    cfg = C(128, 224, 64, cluster_n=2)
    assert fits(cfg, _g(2560), _g(2304))  # better here than where it was tuned
    for m in range(2049, 2561, 13):
        rel = lambda p: config_cost(cfg, p) / modelled_best(p)  # noqa: E731
        assert fits(cfg, _g(2304), _g(m)) == (rel(_g(m)) <= rel(_g(2304)) * (1 + BUCKET_FIT_TOLERANCE))


def test_gemms_the_model_does_not_describe_always_fit() -> None:
    """Decode GEMMs (the model ranks nothing) and the ping-pong schedule (two tiles in flight)."""
    assert fits(C(128, 16, 128, swap_ab=True), _g(16, 4096), _g(9, 4096))
    pp = C(128, 224, 64, cluster_n=2, schedule=Schedule.PINGPONG)
    assert fits(pp, _g(2304), _g(2560))
    assert not fits(dataclasses.replace(pp, schedule=Schedule.COOPERATIVE), _g(2304), _g(2433))
