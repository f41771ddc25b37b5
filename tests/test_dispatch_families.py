"""Dispatch over two families that both hold records of a problem (hopper_gemm and hopper_gemv on a
decode GEMM): the better rank serves; between records of one rank and one problem, the faster; a
tie, or records of other problems (bucket neighbours), keeps the registry's order."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

from _dispatch_fakes import HARD_KEY, FakeFamily, FakeStore, FakeTuner, Record, calls, device_info, settings
from autocutlass.device import HardKey
from autocutlass.dispatch import Dispatcher, Layers
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.settings import Policy


class Second(FakeFamily):
    name = "fake2"

    def source_hash(self) -> str:
        return "fake2"


class ByHash(FakeStore):
    """lookup -> the record of the family whose source hash is in the hard key."""

    def __init__(self, by_hash: dict[str, Record]) -> None:
        super().__init__()
        self.by_hash = by_hash

    def lookup(self, problem: GemmProblem, hard_key: HardKey) -> Record | None:
        if hard_key.kernel_hash.startswith("torch-"):
            return None
        assert hard_key == replace(HARD_KEY, kernel_hash=hard_key.kernel_hash)
        return self.by_hash.get(hard_key.kernel_hash)


def _rig(by_hash: dict[str, Record]) -> tuple[Any, FakeFamily, FakeFamily]:
    first, second = FakeFamily(), Second()
    fams = {f.name: f for f in (first, second)}
    store = ByHash(by_hash)
    layers = Layers(get_family=lambda name: fams[name], families_for=lambda p: [first, second],
                    open_store=lambda s: (store, store), tune=FakeTuner(), why_unsupported=lambda p: "")  # fmt: skip
    d = Dispatcher(settings(policy=Policy.CACHED), layers=layers, device_info=lambda i: device_info(),
                   on_gpu=lambda t: True)  # fmt: skip
    return calls(d), first, second


X = torch.randn(4, 256, dtype=torch.bfloat16)
W = torch.randn(512, 256, dtype=torch.bfloat16)


def _rec(family: str, source: str, ms: float, problem: Any = "same") -> Record:
    return Record(family, {"tile": 128}, source, hard_key=replace(HARD_KEY, kernel_hash=family), problem=problem,
                  median_ms=ms)  # fmt: skip


def _served(by_hash: dict[str, Record]) -> str:
    c, first, second = _rig(by_hash)
    y = c.linear(X, W)
    assert torch.allclose(y.float(), X.float() @ W.float().t(), rtol=2e-2, atol=2e-1)
    assert len(first.launches) + len(second.launches) == 1
    return "fake" if first.launches else "fake2"


@pytest.mark.parametrize(("first_ms", "second_ms", "want"), [(1.0, 0.5, "fake2"), (0.5, 1.0, "fake"), (1.0, 1.0, "fake")])
def test_the_faster_exact_record_serves(first_ms: float, second_ms: float, want: str) -> None:
    assert _served({"fake": _rec("fake", "exact", first_ms), "fake2": _rec("fake2", "exact", second_ms)}) == want


def test_a_better_rank_serves_however_slow() -> None:
    assert _served({"fake": _rec("fake", "exact", 9.0), "fake2": _rec("fake2", "bucket", 0.1)}) == "fake"
    assert _served({"fake": _rec("fake", "bucket", 0.1), "fake2": _rec("fake2", "exact", 9.0)}) == "fake2"


def test_records_of_other_problems_are_not_compared_by_time() -> None:
    """Two bucket records tuned at different M: their times are not of this problem."""
    recs = {"fake": _rec("fake", "bucket", 9.0, problem="m=16"), "fake2": _rec("fake2", "bucket", 0.1, problem="m=9")}
    assert _served(recs) == "fake"
    recs = {"fake": _rec("fake", "bucket", 9.0, problem="m=16"), "fake2": _rec("fake2", "bucket", 0.1, problem="m=16")}
    assert _served(recs) == "fake2"


def test_a_lone_record_of_the_second_family_serves() -> None:
    assert _served({"fake2": _rec("fake2", "exact", 5.0)}) == "fake2"


def test_a_bucket_record_that_does_not_fit_is_skipped_quietly_an_exact_one_is_reported(
        caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """Another M's GEMV record of the bucket may not fit this M (its m_tile): expected, no warning;
    this problem's own record not fitting is worth one."""
    misfit = Record("fake2", {"tile": 100}, "bucket", hard_key=replace(HARD_KEY, kernel_hash="fake2"), problem="m=1")
    with caplog.at_level("WARNING", logger="autocutlass"):
        assert _served({"fake": _rec("fake", "bucket", 9.0), "fake2": misfit}) == "fake"
    assert "no longer serves" not in caplog.text
    misfit = replace(misfit, source="exact", problem="same")
    with caplog.at_level("WARNING", logger="autocutlass"):
        assert _served({"fake": _rec("fake", "bucket", 9.0), "fake2": misfit}) == "fake"
    assert "no longer serves" in caplog.text
