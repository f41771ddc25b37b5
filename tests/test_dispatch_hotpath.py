"""The hit path's work, counted instead of timed (a loaded 2-core CI machine makes microsecond
budgets flaky): on a memo hit, dispatch builds one metadata key, does one dict lookup and runs
the memoised entry. The Python functions entered during one hit call are recorded with a
profile hook; the test fails when the hit path plans, looks anything up, compiles, or grows
new layers of calls. (Timings side by side with torch are the bench's job: ``autocutlass bench``
reports the hit path's host time beside ``torch.matmul``'s.)

The public entry points (``autocutlass.matmul`` ...) add, before the dispatcher, the checks that
choose between the eager path and the custom-op graph path: grad mode, ``requires_grad`` and CUDA
autocast are C calls (not counted), ``torch.compiler.is_compiling()`` is two small Python functions
(``is_compiling`` and ``torch.jit.is_scripting``), counted here: ``MAX_PUBLIC_HIT_CALLS``."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

import pytest
import torch

from _dispatch_fakes import calls, make_rig
from autocutlass.ops.conv import frontend as conv_frontend
from autocutlass.ops.gemm import frontend as validate
from autocutlass.settings import Policy

BF = torch.bfloat16

HIT_FUNCTIONS = {
    # the test's own wrapper and the core: Calls.<op> -> Dispatcher.call -> memo_key
    "Calls.matmul", "Calls.linear", "Calls.scaled_mm", "Calls.conv2d", "Dispatcher.call",
    "MatmulFrontEnd.memo_key", "LinearFrontEnd.memo_key", "ScaledMmFrontEnd.memo_key", "Conv2dFrontEnd.memo_key",
    # the memoised entry: the op's adapter lambda and its launch closure, then the runner
    "MatmulFrontEnd.kernel_entry.<locals>.<lambda>", "LinearFrontEnd.kernel_entry.<locals>.launch",
    "_runner_launch.<locals>.run", "_direct_launch.<locals>.run", "ScaledMmFrontEnd.kernel_entry.<locals>.run", "Conv2dFrontEnd.kernel_entry.<locals>.run",
    "GemmLowering.runner.<locals>.run", "meta", "_noop_runner",
}  # fmt: skip
"""Every Python function a hit may enter (C functions such as torch.empty are not counted)."""

MAX_HIT_CALLS = 8
"""Python-level calls per hit at most (matmul: 6 today, the test's wrapper and the runner included)."""

PUBLIC_FUNCTIONS = {"matmul", "linear", "gemm", "scaled_mm", "conv2d", "is_compiling", "is_scripting"}
"""What a public entry point adds: itself (in place of the test's wrapper) and the compile check."""

MAX_PUBLIC_HIT_CALLS = MAX_HIT_CALLS + 2
"""The compile check's two functions on top (matmul: 8 today, scaled_mm 9)."""


def _noop_runner(a, b, d, *, c=None, bias=None, alpha=1.0, beta=0.0, scale_a=None, scale_b=None) -> None:  # noqa: ANN001
    pass


def _entered(f: Callable[[], object]) -> list[str]:
    entered: list[str] = []

    def hook(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "call":
            entered.append(frame.f_code.co_qualname)

    # No garbage collection inside the profiled call: a collection there runs callbacks of objects
    # other tests left behind (a dead Dispatcher leaving its WeakSet), which are not the hit path's.
    gc.collect()
    gc.disable()
    sys.setprofile(hook)
    try:
        f()
    finally:
        sys.setprofile(None)
        gc.enable()
    return entered[1:]  # f itself first


def _assert_cheap(f: Callable[[], object], allowed: set[str] = HIT_FUNCTIONS, limit: int = MAX_HIT_CALLS) -> list[str]:
    f()  # warm: the memo holds the entry now
    entered = _entered(f)
    assert set(entered) <= allowed, sorted(set(entered) - allowed)
    assert len(entered) <= limit, entered
    return entered


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    rig = make_rig(Policy.HEURISTIC)

    def compile_noop(config, problem):  # noqa: ANN001, ANN202
        lowering = getattr(problem, "gemm_lowering", None)
        return lowering().runner(_noop_runner) if lowering is not None else _noop_runner

    monkeypatch.setattr(rig.family, "compile", compile_noop)
    return rig


def test_hit_paths_enter_only_the_key_the_lookup_and_the_entry(rig, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    d = calls(rig.dispatcher)
    a, b = torch.randn(64, 32).to(BF), torch.randn(32, 48).to(BF)
    x, w, bias = torch.randn(4, 16, 32).to(BF), torch.randn(48, 32).to(BF), torch.randn(48).to(BF)
    d.matmul(a, b)
    d.linear(x, w, bias, "silu")
    monkeypatch.setattr(validate, "plan", lambda *args: pytest.fail("planned on a hit"))
    mm = _assert_cheap(lambda: d.matmul(a, b))
    _assert_cheap(lambda: d.linear(x, w, bias, "silu"))
    assert mm == ["Calls.matmul", "Dispatcher.call", "MatmulFrontEnd.memo_key",
                  "MatmulFrontEnd.kernel_entry.<locals>.<lambda>", "_runner_launch.<locals>.run", "_noop_runner"]  # fmt: skip
    assert rig.dispatcher.stats().memo_misses == 2 and rig.store.lookups == []


def test_scaled_mm_hit_path(rig, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    d = calls(rig.dispatcher)
    f8 = torch.float8_e4m3fn
    a, b = torch.randn(64, 32).to(f8), torch.randn(48, 32).to(f8).t()
    sa, sb, bias = torch.ones(()), torch.ones(()), torch.randn(48).to(BF)
    d.scaled_mm(a, b, sa, sb, bias, BF, None, "silu", use_fast_accum=True)
    monkeypatch.setattr(validate, "plan", lambda *args: pytest.fail("planned on a hit"))
    _assert_cheap(lambda: d.scaled_mm(a, b, sa, sb, bias, BF, None, "silu", use_fast_accum=True))
    assert rig.dispatcher.stats().memo_misses == 1 and rig.dispatcher.stats().fallbacks == 0


def test_conv2d_hit_path(rig, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    d = calls(rig.dispatcher)
    cl = torch.channels_last
    x = torch.randn(2, 32, 5, 7).to(BF).contiguous(memory_format=cl)
    w = torch.randn(48, 32, 1, 1).to(BF).contiguous(memory_format=cl)
    d.conv2d(x, w)
    monkeypatch.setattr(conv_frontend, "plan", lambda *args: pytest.fail("planned on a hit"))
    _assert_cheap(lambda: d.conv2d(x, w))
    assert rig.dispatcher.stats().memo_misses == 1 and rig.dispatcher.stats().fallbacks == 0


def test_a_hit_that_plans_is_caught(rig) -> None:  # noqa: ANN001
    """The guard itself: a front-end that re-plans on every call fails the check."""
    d = calls(rig.dispatcher)
    a, b = torch.randn(64, 32).to(BF), torch.randn(32, 48).to(BF)
    rig.dispatcher.clear()
    with pytest.raises(AssertionError):
        _assert_cheap(lambda: (rig.dispatcher.clear(), d.matmul(a, b)))


def test_public_entry_points_reach_the_dispatcher_without_the_op_boundary(rig, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """``autocutlass.matmul`` etc. with inputs that need no autograd: the compile check, then the
    same hit path (no ``torch.ops.autocutlass`` call, no graph-path function)."""
    from autocutlass import api

    monkeypatch.setattr(api, "_default", rig.dispatcher)
    allowed, limit = HIT_FUNCTIONS | PUBLIC_FUNCTIONS, MAX_PUBLIC_HIT_CALLS
    a, b = torch.randn(64, 32).to(BF), torch.randn(32, 48).to(BF)
    x, w, bias = torch.randn(4, 16, 32).to(BF), torch.randn(48, 32).to(BF), torch.randn(48).to(BF)
    f8 = torch.float8_e4m3fn
    a8, b8, s1 = torch.randn(64, 32).to(f8), torch.randn(48, 32).to(f8).t(), torch.ones(())
    cl = torch.channels_last
    xc = torch.randn(2, 32, 5, 7).to(BF).contiguous(memory_format=cl)
    wc = torch.randn(48, 32, 1, 1).to(BF).contiguous(memory_format=cl)
    mm = _assert_cheap(lambda: api.matmul(a, b), allowed, limit)
    assert mm == ["matmul", "is_compiling", "is_scripting", "Dispatcher.call", "MatmulFrontEnd.memo_key",
                  "MatmulFrontEnd.kernel_entry.<locals>.<lambda>", "_runner_launch.<locals>.run", "_noop_runner"]  # fmt: skip
    _assert_cheap(lambda: api.linear(x, w, bias, activation="silu"), allowed, limit)
    _assert_cheap(lambda: api.scaled_mm(a8, b8, s1, s1, bias, out_dtype=BF, use_fast_accum=True), allowed, limit)
    _assert_cheap(lambda: api.conv2d(xc, wc), allowed, limit)
    wg = w.clone().requires_grad_()
    with torch.no_grad():  # grad mode off: parameters that require grad take the eager path too
        _assert_cheap(lambda: api.linear(x, wg, bias), allowed, limit)
    assert rig.dispatcher.stats().fallbacks == 0
