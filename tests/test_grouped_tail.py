"""The rows of a grouped output past ``offs[-1]``, zeroed on the torch path
(``autocutlass.ops.grouped.tail``): the masked fill on CPU tensors, the first-use check that
admits a correct kernel and refuses wrong ones (with torch stand-ins for the kernel on CPU), the
fallbacks when the kernel cannot be fetched, and the ``tail_zero`` kernel compiling for both
element widths into stores only of the tail (CUTE_DSL_ARCH=sm_90a; tests/test_gpu_grouped.py runs
it on a GPU)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from autocutlass.ops.grouped import tail

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    tail.reset()
    yield
    tail.reset()


def _kernel_like(end_of: Callable[[torch.Tensor, int], int]) -> tail.Launcher:
    """A torch stand-in for the kernel: zeroes rows [end_of(offs, T), T) of its (T, N) view."""

    def fn(y: torch.Tensor, offs: torch.Tensor) -> None:
        y[max(0, end_of(offs, y.shape[0])) :] = 0

    return fn


RIGHT = _kernel_like(lambda offs, t: min(int(offs[-1]), t))
WRONG = {
    "from the first end": _kernel_like(lambda offs, t: min(int(offs[0]), t)),
    "no clamp past T": _kernel_like(lambda offs, t: int(offs[-1]) - 1),
    "nothing": lambda y, offs: None,
    "the padding too": lambda y, offs: y.as_strided((y.shape[0], y.stride(0)), (y.stride(0), 1))[
        min(int(offs[-1]), y.shape[0]) :].zero_(),  # fmt: skip
}


@pytest.mark.parametrize("bits", [torch.int16, torch.int32])
def test_the_check_admits_a_kernel_that_zeroes_exactly_the_tail(bits: torch.dtype) -> None:
    assert tail.check(RIGHT, CPU, bits) is None


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_check_refuses_a_kernel_that_zeroes_other_rows(name: str) -> None:
    assert tail.check(WRONG[name], CPU, torch.int16) is not None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cpu_outputs_are_zeroed_by_the_masked_fill(dtype: torch.dtype) -> None:
    y = torch.randn(9, 6).to(dtype)
    want = y.clone()
    want[5:] = 0
    assert tail.zero_tail(y, torch.tensor([2, 2, 5], dtype=torch.int32)) is y
    assert torch.equal(y, want)
    full = torch.randn(4, 3).to(dtype)
    kept = full.clone()
    tail.zero_tail(full, torch.tensor([1, 4], dtype=torch.int32))
    assert torch.equal(full, kept)  # no tail: nothing written


def test_an_empty_output_launches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tail, "_launcher", lambda y: pytest.fail("asked for the kernel of an empty output"))
    for shape in ((0, 4), (5, 0)):
        y = torch.empty(shape)
        assert tail.zero_tail(y, torch.tensor([0], dtype=torch.int32)) is y


class _Cuda:
    """What ``_prepare`` asks of torch.cuda, on a CPU machine: an sm_90 device (or another cc)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cc: tuple[int, int] = (9, 0)) -> None:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: cc)
        monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
        self.checked: list[Any] = []
        real = tail.check

        def check(fn: tail.Launcher, device: torch.device, bits: torch.dtype) -> str | None:
            self.checked.append((fn, bits))
            return real(fn, CPU, bits)  # the probes on the CPU

        monkeypatch.setattr(tail, "check", check)


def test_a_kernel_that_passes_its_check_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = _Cuda(monkeypatch)
    fetched: list[int] = []
    monkeypatch.setattr(tail, "fetch", lambda width: fetched.append(width) or RIGHT)
    assert tail._prepare(0, 2) is RIGHT and tail._prepare(0, 4) is RIGHT
    assert fetched == [16, 32] and [b for _, b in cuda.checked] == [torch.int16, torch.int32]


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_kernel_that_fails_its_check_is_not_used(monkeypatch: pytest.MonkeyPatch, name: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    _Cuda(monkeypatch)
    monkeypatch.setattr(tail, "fetch", lambda width: WRONG[name])
    with caplog.at_level(logging.ERROR, logger="autocutlass"):
        assert tail._prepare(0, 2) is None
    assert any("failed its check" in m for m in caplog.messages)


def test_a_kernel_that_cannot_be_fetched_leaves_the_masked_fill(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    _Cuda(monkeypatch)

    def fail(width: int) -> tail.Launcher:
        raise RuntimeError("no DSL here")

    monkeypatch.setattr(tail, "fetch", fail)
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        assert tail._prepare(0, 2) is None
    assert any("unavailable" in m and "no DSL here" in m for m in caplog.messages)


def test_other_gpus_use_the_masked_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = _Cuda(monkeypatch, cc=(8, 0))
    monkeypatch.setattr(tail, "fetch", lambda width: pytest.fail("fetched for an sm_80 device"))
    assert tail._prepare(0, 2) is None and cuda.checked == []


# ---- the kernel, compiled off-GPU ------------------------------------------------------------
def _module() -> Any:
    pytest.importorskip("cutlass")
    from autocutlass.kernels import tail_zero

    return tail_zero


@pytest.mark.compile
@pytest.mark.parametrize("width", [16, 32])
def test_the_kernel_compiles_into_tail_stores_only(width: int, tmp_path: Path) -> None:
    """One int32 load (offs[E-1]), stores of the width and no other global access."""
    ptx = _module()._compile(width, ptx_dir=tmp_path).__ptx__
    count = Counter(re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)\s", ptx, re.MULTILINE))
    loads = {k: v for k, v in count.items() if k.startswith("ld.global")}
    stores = {k: v for k, v in count.items() if k.startswith("st.global")}
    assert loads == {"ld.global.b32": 1}, count
    assert stores == {f"st.global.b{width}": 1}, count
    assert "max.s32" in count and "min.s32" in count  # the end clamped into [0, T]


def test_the_compile_key_follows_width_source_and_dsl(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _module()
    key = t.tail_zero_compile_key(16)
    assert t.tail_zero_compile_key(32) != key
    monkeypatch.setattr(t, "own_source_hash", lambda: "edited")
    assert t.tail_zero_compile_key(16) != key
    monkeypatch.undo()
    monkeypatch.setattr(t, "dsl_version", lambda: "0.0.0")
    assert t.tail_zero_compile_key(16) != key
    with pytest.raises(ValueError):
        t.tail_zero_compile_key(8)
