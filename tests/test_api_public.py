"""The public surface: names, lazy import, and the module-level entry points on CPU tensors
(served by torch) driven by the AUTOCUTLASS_* environment."""

from __future__ import annotations

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
    y = autocutlass.scaled_mm(a, w.t(), sa, sb, bias=bias, activation="relu")  # out_dtype: bfloat16
    assert y.dtype is BF and torch.equal(y, F.relu(torch._scaled_mm(a, w.t(), sa, sb, bias=bias, out_dtype=BF)))
    out = torch.empty(8, 16, dtype=torch.float32)
    assert autocutlass.scaled_mm(a, w.t(), sa, sb, out_dtype=torch.float32, out=out) is out
    assert torch.equal(out, torch._scaled_mm(a, w.t(), sa, sb, out_dtype=torch.float32))
    assert autocutlass.stats().fallbacks == 2
    with pytest.raises(TypeError):
        autocutlass.scaled_mm(a, w.t(), sa, sb, bias)  # type: ignore[misc]  # bias= is keyword-only here
    with pytest.raises(RuntimeError, match=r"\(8, 32\).*\(16, 16\)"):
        autocutlass.scaled_mm(a, w[:, :16], sa, sb)


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
