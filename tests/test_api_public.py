"""The public surface: names, lazy import, and the module-level entry points on CPU tensors
(served by torch) driven by the AUTOCUTLASS_* environment."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import autocutlass

BF = torch.bfloat16


@pytest.fixture(autouse=True)
def fresh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("AUTOCUTLASS_POLICY", "AUTOCUTLASS_STRICT", "AUTOCUTLASS_LOG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    autocutlass.reset()
    yield tmp_path
    autocutlass.reset()


def test_all_names_resolve() -> None:
    for name in autocutlass.__all__:
        assert getattr(autocutlass, name) is not None, name
    names = {"matmul", "linear", "gemm", "scaled_mm", "policy", "stats", "UnsupportedProblem"}
    assert names <= set(autocutlass.__all__)
    assert set(autocutlass.__all__) <= set(dir(autocutlass))
    with pytest.raises(AttributeError):
        autocutlass.not_a_thing  # noqa: B018


def test_import_is_light() -> None:
    code = "import sys, autocutlass; assert 'torch' not in sys.modules; assert 'autocutlass.kernels' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def test_cpu_calls_run_torch_and_count_fallbacks(fresh_env: Path) -> None:
    a, b = torch.randn(8, 16).to(BF), torch.randn(16, 4).to(BF)
    assert torch.equal(autocutlass.matmul(a, b), a @ b)
    w, bias = torch.randn(4, 16).to(BF), torch.randn(4).to(BF)
    assert torch.equal(autocutlass.linear(a, w, bias, activation="relu"), F.relu(F.linear(a, w, bias)))
    c = torch.randn(8, 4).to(BF)
    assert torch.equal(autocutlass.gemm(a, b, c, alpha=2.0, beta=0.5), torch.addmm(c, a, b, alpha=2.0, beta=0.5))
    out = torch.empty(8, 4, dtype=BF)
    assert autocutlass.matmul(a, b, out=out) is out and torch.equal(out, a @ b)
    s = autocutlass.stats()
    assert s.fallbacks == 4 and s.compiles == 0 and s.db_lookups == 0
    assert not (fresh_env / "tuning.sqlite").exists()  # unsupported calls never open the database
    autocutlass.matmul(a, b)
    assert autocutlass.stats().memo_hits == 1


def test_scaled_mm_on_cpu_runs_torch_scaled_mm(fresh_env: Path) -> None:
    f8 = torch.float8_e4m3fn
    a, w = torch.randn(8, 32).to(f8), torch.randn(16, 32).to(f8)
    sa, sb, bias = torch.tensor(0.5), torch.tensor(2.0), torch.randn(16).to(BF)
    y = autocutlass.scaled_mm(a, w.t(), sa, sb, bias=bias, out_dtype=BF, activation="relu")
    assert y.dtype is BF and torch.equal(y, F.relu(torch._scaled_mm(a, w.t(), sa, sb, bias=bias, out_dtype=BF)))
    out = torch.empty(8, 16, dtype=torch.float32)
    assert autocutlass.scaled_mm(a, w.t(), sa, sb, out_dtype=torch.float32, out=out) is out
    assert torch.equal(out, torch._scaled_mm(a, w.t(), sa, sb, out_dtype=torch.float32))
    y = autocutlass.scaled_mm(a, w.t(), sa, sb)  # torch's defaults: out_dtype None (fp8 output), no fast accumulation
    assert y.dtype is f8 and torch.equal(y.float(), torch._scaled_mm(a, w.t(), sa, sb).float())
    assert autocutlass.stats().fallbacks == 3
    with pytest.raises(RuntimeError, match=r"\(8, 32\).*\(16, 16\)"):
        autocutlass.scaled_mm(a, w[:, :16], sa, sb, out_dtype=BF)


def test_scaled_mm_signature_is_torch_scaled_mms() -> None:
    """torch._scaled_mm's parameters in its order (bias, scale_result, out_dtype, use_fast_accum
    positional or keyword, with its defaults), then the keyword-only extras out and activation."""
    schema = torch.ops.aten._scaled_mm.default._schema.arguments
    params = list(inspect.signature(autocutlass.scaled_mm).parameters.values())
    assert [p.name for p in params[:4]] == ["a", "b", "scale_a", "scale_b"]  # torch: self, mat2, scale_a, scale_b
    assert [p.name for p in params[2 : len(schema)]] == [arg.name for arg in schema[2:]]
    for p, arg in zip(params[4 : len(schema)], schema[4:], strict=True):
        assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default == arg.default_value, (p, arg)
    assert [(p.name, p.kind, p.default) for p in params[len(schema) :]] == [
        ("out", inspect.Parameter.KEYWORD_ONLY, None), ("activation", inspect.Parameter.KEYWORD_ONLY, None)
    ]  # fmt: skip


def test_scaled_mm_positional_arguments_mean_what_torchs_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the public entry point into a dispatcher with a fake fp8 kernel (CPU tensors stand
    in for GPU ones): positional bias, out_dtype, use_fast_accum reach the kernel, torch's
    positional order runs torch, and out/activation are keyword-only."""
    from _dispatch_fakes import make_rig

    from autocutlass import api
    from autocutlass.settings import Policy

    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    f8 = torch.float8_e4m3fn
    a, b = torch.randn(32, 64).to(f8), torch.randn(48, 64).to(f8).t()
    sa, sb = torch.tensor(0.5), torch.tensor(2.0)
    bias = torch.randn(48).to(torch.float16)
    y = autocutlass.scaled_mm(a, b, sa, sb, bias, None, torch.float16, True)  # served
    ref = torch._scaled_mm(a, b, sa, sb, bias, None, torch.float16, True)
    assert y.dtype is torch.float16
    torch.testing.assert_close(y, ref, atol=6e-2, rtol=2e-2)
    (launch,) = rig.family.launches
    assert launch.bias is bias and launch.d.dtype is torch.float16 and rig.dispatcher.stats().fallbacks == 0
    y = autocutlass.scaled_mm(a, b, sa, sb, bias, None, torch.float16)  # use_fast_accum=False: torch
    assert torch.equal(y, torch._scaled_mm(a, b, sa, sb, bias, None, torch.float16))
    y = autocutlass.scaled_mm(a, b, sa, sb, None, torch.tensor(4.0), f8, True)  # scale_result: torch
    assert y.dtype is f8 and torch.equal(y.float(), torch._scaled_mm(a, b, sa, sb, None, torch.tensor(4.0), f8, True).float())
    assert rig.dispatcher.stats().fallbacks == 2 and len(rig.family.launches) == 1
    with pytest.raises(TypeError):
        autocutlass.scaled_mm(a, b, sa, sb, None, None, BF, True, torch.empty(32, 48, dtype=BF))  # type: ignore[misc]
    y = autocutlass.scaled_mm(a, b, sa, sb, out_dtype=BF, use_fast_accum=True, out=torch.empty(32, 48, dtype=BF),
                              activation="relu")  # fmt: skip
    assert len(rig.family.launches) == 2 and rig.family.launches[-1].problem.epilogue.activation == "relu"


def test_scaled_mm_strict_env_raises_for_e5m2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the public entry point and AUTOCUTLASS_STRICT=1 (on CPU the first reason is the device)."""
    from _dispatch_fakes import make_rig

    from autocutlass import api
    from autocutlass.settings import Policy

    e5m2 = torch.float8_e5m2
    a, b, one = torch.randn(32, 64).to(e5m2), torch.randn(48, 64).to(e5m2).t(), torch.tensor(1.0)
    monkeypatch.setenv("AUTOCUTLASS_STRICT", "1")
    autocutlass.reset()
    with pytest.raises(autocutlass.UnsupportedProblem, match="cpu"):
        autocutlass.scaled_mm(a, b, one, one, out_dtype=BF, use_fast_accum=True)
    autocutlass.reset()  # so that monkeypatch restores no dispatcher
    monkeypatch.setattr(api, "_default", make_rig(Policy.HEURISTIC, strict=True).dispatcher)
    with pytest.raises(autocutlass.UnsupportedProblem, match="only float8_e4m3fn x float8_e4m3fn is served"):
        autocutlass.scaled_mm(a, b, one, one, None, None, BF, True)
    monkeypatch.delenv("AUTOCUTLASS_STRICT")
    autocutlass.reset()
    y = autocutlass.scaled_mm(a, b, one, one, None, None, BF, True)  # not strict: torch's result
    assert torch.equal(y, torch._scaled_mm(a, b, one, one, None, None, BF, True))
    assert autocutlass.stats().fallbacks == 1


def test_errors_raise_like_torch() -> None:
    with pytest.raises(RuntimeError, match=r"\(8, 16\).*\(15, 4\)"):
        autocutlass.matmul(torch.randn(8, 16), torch.randn(15, 4))
    with pytest.raises(RuntimeError, match="out= has dtype"):
        autocutlass.matmul(torch.randn(8, 16), torch.randn(16, 4), out=torch.empty(8, 4, dtype=BF))
    with pytest.raises(TypeError):
        autocutlass.matmul([[1.0]], torch.randn(1, 1))


def test_strict_env_raises_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_STRICT", "1")
    autocutlass.reset()
    with pytest.raises(autocutlass.UnsupportedProblem, match="cpu"):
        autocutlass.matmul(torch.randn(8, 16), torch.randn(16, 4))


def test_policy_env_and_context_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with autocutlass.policy("off"):
        autocutlass.matmul(a, b)
    assert autocutlass.stats().fallbacks == 0  # off runs torch by choice, not as a fallback
    autocutlass.matmul(a, b)
    assert autocutlass.stats().fallbacks == 1
    monkeypatch.setenv("AUTOCUTLASS_POLICY", "off")
    autocutlass.reset()
    autocutlass.matmul(a, b)
    assert autocutlass.stats().fallbacks == 0 and autocutlass.stats().memo_misses == 1
    monkeypatch.setenv("AUTOCUTLASS_POLICY", "fastest")
    autocutlass.reset()
    with pytest.raises(ValueError, match="AUTOCUTLASS_POLICY"):
        autocutlass.matmul(a, b)
