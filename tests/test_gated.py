"""``linear(..., mul=)``: act(x W^T + b) * mul, the gated MLP's epilogue. Its semantics against torch
(bias, activations, broadcast mul, with a residual), errors, gradients (float64 gradcheck through
the fallback; the op's autograd formula through opcheck), torch.compile (one op in the inference
graph, the activation and multiply outside while training), dispatch with the fake family (the
launch's C is the mul, the epilogue multiplies; what the kernel cannot read runs torch), the
problem's key (unchanged for every other epilogue), and the ``hopper_gemm_gated`` family: its
gate, its rules, hopper_gemm's refusal, sampled configs compiling (CUTE_DSL_ARCH=sm_90a)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from _dispatch_fakes import calls, make_rig
from torch._dynamo.testing import AotEagerAndRecordGraphs
from torch._dynamo.utils import counters
from torch.autograd import gradcheck
from torch.library import opcheck

import autocutlass
from autocutlass import torch_ops  # noqa: F401  (registers the ops)
from autocutlass.kernels import families_for, get_family, unsupported_reason
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, Schedule, SplitMode, Store
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major
from autocutlass.ops.registry import problem_from_dict
from autocutlass.ops.types import Activation, Epilogue
from autocutlass.settings import Policy

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
BF, F64 = torch.bfloat16, torch.float64
ACTS = {None: lambda y: y, "silu": F.silu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"), "relu": F.relu}


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:  # noqa: ANN001
    for name in ("AUTOCUTLASS_POLICY", "AUTOCUTLASS_GATED_KERNELS", "AUTOCUTLASS_STRICT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    autocutlass.reset()
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    autocutlass.reset()


# ---- semantics and errors (CPU: torch computes) ------------------------------------------------
@pytest.mark.parametrize("act", sorted(ACTS, key=str))
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_mul_is_the_activation_times_mul(act: str | None, with_bias: bool) -> None:
    x, wg, wu = torch.randn(2, 5, 16), torch.randn(24, 16), torch.randn(24, 16)
    b = torch.randn(24) if with_bias else None
    up = F.linear(x, wu)
    torch.testing.assert_close(autocutlass.linear(x, wg, b, activation=act, mul=up), ACTS[act](F.linear(x, wg, b)) * up)
    row = torch.randn(24)  # a broadcast mul
    torch.testing.assert_close(autocutlass.linear(x, wg, b, activation=act, mul=row), ACTS[act](F.linear(x, wg, b)) * row)
    res = torch.randn(2, 5, 24)  # with a residual: act(z + residual) * mul
    torch.testing.assert_close(autocutlass.linear(x, wg, b, activation=act, residual=res, mul=up),
                               ACTS[act](F.linear(x, wg, b) + res) * up)  # fmt: skip


def test_a_bad_mul_is_refused_as_the_residual_is() -> None:
    x, w = torch.randn(5, 16), torch.randn(24, 16)
    with pytest.raises(RuntimeError, match=r"mul of shape \(7, 24\) does not broadcast"):
        autocutlass.linear(x, w, mul=torch.randn(7, 24))
    with pytest.raises(RuntimeError, match="mul has dtype torch.float64"):
        autocutlass.linear(x, w, mul=torch.randn(5, 24, dtype=F64))
    with pytest.raises(TypeError, match="mul must be a torch.Tensor"):
        autocutlass.linear(x, w, mul=[1.0])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"mul of shape \(7, 24\)"):  # the graph path, too
        autocutlass.linear(x.requires_grad_(), w, mul=torch.randn(7, 24))


# ---- gradients ---------------------------------------------------------------------------------
@pytest.mark.parametrize("act", ["silu", "gelu_tanh", None])
def test_gradients_through_the_fallback(act: str | None) -> None:
    x, w, b = (torch.randn(*s, dtype=F64, requires_grad=True) for s in ((2, 3, 8), (6, 8), (6,)))
    m = torch.randn(2, 3, 6, dtype=F64, requires_grad=True)
    assert gradcheck(lambda x, w, b, m: autocutlass.linear(x, w, b, activation=act, mul=m), (x, w, b, m))
    row = torch.randn(6, dtype=F64, requires_grad=True)
    assert gradcheck(lambda x, row: autocutlass.linear(x, w, activation=act, mul=row), (x, row))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("act", ["silu", None])
def test_the_op_with_mul_passes_opcheck(act: str | None) -> None:
    args = (torch.randn(5, 8, requires_grad=True), torch.randn(6, 8, requires_grad=True), torch.randn(6, requires_grad=True),
            act, None, torch.randn(5, 6, requires_grad=True))  # fmt: skip
    opcheck(torch.ops.autocutlass.linear.default, args)
    y = torch.ops.autocutlass.linear(*args)  # the op called directly, autograd through its own formula
    y.square().sum().backward()
    xr, wr, br, _, _, mr = (a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args)
    (ACTS[act](F.linear(xr, wr, br)) * mr).square().sum().backward()
    for got, want in zip((args[0], args[1], args[2], args[5]), (xr, wr, br, mr), strict=True):
        torch.testing.assert_close(got.grad, want.grad)


# ---- torch.compile -----------------------------------------------------------------------------
def test_inference_compiles_to_one_op_with_the_mul() -> None:
    backend = AotEagerAndRecordGraphs()
    wg, wu = torch.randn(24, 16), torch.randn(24, 16)

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return autocutlass.linear(x, wg, activation="silu", mul=autocutlass.linear(x, wu))

    x = torch.randn(3, 16)
    with torch.no_grad():
        y = torch.compile(mlp, backend=backend, fullgraph=True)(x)
    assert not counters["graph_break"]
    ops = [n for n in backend.fw_graphs[0].graph.nodes if str(n.target) == "autocutlass.linear.default"]
    assert len(ops) == 2 and ops[1].args[3] == "silu" and ops[1].args[5] is not None  # the mul, in the op
    torch.testing.assert_close(y, F.silu(F.linear(x, wg)) * F.linear(x, wu))


def test_training_compiles_with_the_activation_and_mul_outside() -> None:
    backend = AotEagerAndRecordGraphs()
    wg, wu = torch.randn(24, 16, requires_grad=True), torch.randn(24, 16, requires_grad=True)

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return autocutlass.linear(x, wg, activation="silu", mul=autocutlass.linear(x, wu))

    x = torch.randn(3, 16, requires_grad=True)
    torch.compile(mlp, backend=backend, fullgraph=True)(x).square().mean().backward()
    assert not counters["graph_break"]
    xr, gr, ur = (t.detach().clone().requires_grad_() for t in (x, wg, wu))
    (F.silu(F.linear(xr, gr)) * F.linear(xr, ur)).square().mean().backward()
    for got, want in ((x.grad, xr.grad), (wg.grad, gr.grad), (wu.grad, ur.grad)):
        torch.testing.assert_close(got, want)


# ---- dispatch (the fake family computes the kernel's epilogue) ---------------------------------
@pytest.mark.parametrize("act", ["silu", "gelu_tanh", None])
@pytest.mark.parametrize("with_bias", [False, True])
def test_the_launch_multiplies_by_the_mul_as_c(act: str | None, with_bias: bool) -> None:
    rig = make_rig(Policy.HEURISTIC)
    x, w, up = torch.randn(2, 20, 64).to(BF), torch.randn(96, 64).to(BF), torch.randn(2, 20, 96).to(BF)
    b = torch.randn(96).to(BF) if with_bias else None
    y = calls(rig.dispatcher).linear(x, w, b, act, None, up)
    ref = ACTS[act](F.linear(x.float(), w.float(), None if b is None else b.float())) * up.float()
    torch.testing.assert_close(y.float(), ref, atol=6e-2, rtol=2e-2)
    launch = rig.family.launches[-1]
    ep = launch.problem.epilogue
    assert ep.with_c and ep.c_mul and ep.activation is Activation(act or "none") and ep.bias == with_bias
    assert launch.c is not None and launch.c.data_ptr() == up.data_ptr() and launch.c.shape == (40, 96)
    # the same call with the tensor as a residual: another memo entry, an additive epilogue
    calls(rig.dispatcher).linear(x, w, b, act, up)
    assert not rig.family.launches[-1].problem.epilogue.c_mul


def test_what_the_kernel_cannot_read_runs_torch() -> None:
    rig = make_rig(Policy.HEURISTIC)
    x, w = torch.randn(20, 64).to(BF), torch.randn(96, 64).to(BF)
    up, res = torch.randn(20, 96).to(BF), torch.randn(20, 96).to(BF)
    for args in ((None, torch.randn(96).to(BF)), (res, up), (None, torch.randn(96, 20).to(BF).t())):
        before = len(rig.family.launches)
        y = calls(rig.dispatcher).linear(x, w, None, "silu", *args)
        r, m = args
        z = F.linear(x.float(), w.float()) + (0 if r is None else r.float())
        torch.testing.assert_close(y.float(), F.silu(z) * m.float(), atol=6e-2, rtol=2e-2)
        assert len(rig.family.launches) == before  # broadcast, with a residual, N-strided: torch


# ---- the problem and the family -----------------------------------------------------------------
def test_other_epilogues_keep_their_keys() -> None:
    plain = GemmProblem(m=64, n=64, k=64, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True))
    assert "c_mul" not in plain.as_dict()["epilogue"]
    gated = GemmProblem(m=64, n=64, k=64, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, c_mul=True))
    assert gated.as_dict()["epilogue"]["c_mul"] is True and gated.key() != GemmProblem(
        m=64, n=64, k=64, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True)).key()  # fmt: skip
    assert problem_from_dict(gated.as_dict()) == gated and problem_from_dict(plain.as_dict()) == plain
    with pytest.raises(ValueError, match="c_mul"):
        Epilogue(c_mul=True)


def _gated(m: int = 4096, **kw: object) -> GemmProblem:
    return GemmProblem(m=m, n=14336, k=4096, c_dtype=DType.BF16, b_major=Major.COL,
                       epilogue=Epilogue(with_c=True, activation=Activation.SILU, c_mul=True), **kw)  # type: ignore[arg-type]  # fmt: skip


def test_the_gated_family_alone_serves_a_multiplying_epilogue(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _gated()
    assert "hopper_gemm_gated" in (get_family("hopper_gemm").supports(p) or "")
    assert [f.name for f in families_for(p)] == ["hopper_gemm_gated"]  # on by default (GPU-validated)
    monkeypatch.setenv("AUTOCUTLASS_GATED_KERNELS", "0")
    assert families_for(p) == []
    assert "hopper_gemm_gated: switched off by AUTOCUTLASS_GATED_KERNELS=0" in unsupported_reason(p)
    monkeypatch.setenv("AUTOCUTLASS_GATED_KERNELS", "1")
    assert [f.name for f in families_for(p)] == ["hopper_gemm_gated"]
    plain = GemmProblem(m=4096, n=14336, k=4096, b_major=Major.COL)
    assert "hopper_gemm_gated" not in [f.name for f in families_for(plain)]
    fam = get_family("hopper_gemm_gated")
    assert fam.supports(GemmProblem(m=8, n=8, k=8, a_dtype=DType.E4M3, b_dtype=DType.E4M3, c_dtype=DType.BF16,
                                    b_major=Major.COL, epilogue=Epilogue(with_c=True, c_mul=True))) is not None  # fmt: skip
    decode = _gated(m=8)
    space = fam.space(decode)
    assert space and not any(c.split_k > 1 and c.split_mode is SplitMode.WORKSPACE for c in space)
    assert any(c.split_k > 1 for c in space) and any(c.swap_ab for c in space)
    seeds = fam.seeds(decode)
    assert seeds and all(fam.check(c, decode) is None for c in seeds)
    ws = HopperGemmConfig(64, 128, 128, split_k=4, split_mode=SplitMode.WORKSPACE)
    assert "workspace" in (fam.check(ws, decode) or "")
    prefill = _gated(m=4096)
    assert "tile_m=192" in (fam.check(HopperGemmConfig(192, 128, 64), prefill) or "")
    assert not any(c.n_split for c in fam.space(prefill)) and not any(c.n_split for c in fam.seeds(prefill))
    # the additive GEMM's swapped orientation beyond decode (hopper_gemm.swap_dp_candidate) stays out
    from autocutlass.kernels.hopper_gemm_gated.check import additive

    assert any(c.swap_ab for c in get_family("hopper_gemm").space(additive(prefill)))
    assert not any(c.swap_ab for c in fam.space(prefill)) and not any(c.swap_ab for c in fam.seeds(prefill))
    assert fam.source_hash() != get_family("hopper_gemm").source_hash()


GATED_CONFIGS = {
    "coop tma bias": (HopperGemmConfig(128, 256, 64, cluster_m=2), Epilogue(with_c=True, bias=True,
                                                                            activation=Activation.SILU, c_mul=True), 4096),
    "pingpong direct": (HopperGemmConfig(64, 128, 64, schedule=Schedule.PINGPONG, store=Store.DIRECT),
                        Epilogue(with_c=True, activation=Activation.GELU_TANH, c_mul=True), 64),
    "swap_ab split-k": (HopperGemmConfig(128, 16, 128, split_k=2, swap_ab=True),
                        Epilogue(with_c=True, bias=True, activation=Activation.SILU, c_mul=True), 8),
    "stream-k": (HopperGemmConfig(128, 128, 64, stream_k=True), Epilogue(with_c=True, c_mul=True), 256),
    "fitted width": (HopperGemmConfig(128, 144, 64), Epilogue(with_c=True, activation=Activation.SILU, c_mul=True), 1536),
}  # fmt: skip


@pytest.mark.compile
@pytest.mark.parametrize("name", sorted(GATED_CONFIGS))
def test_gated_configs_compile(name: str, tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("cutlass")
    from autocutlass.kernels.hopper_gemm_gated import HopperGemmGatedFamily
    from autocutlass.kernels.hopper_gemm_gated import compile as gated_compile

    cfg, epi, m = GATED_CONFIGS[name]
    p = GemmProblem(m=m, n=4096, k=4096, c_dtype=DType.BF16, b_major=Major.COL, epilogue=epi)
    fam = HopperGemmGatedFamily(tmp_path)
    assert fam.check(cfg, p) is None, fam.check(cfg, p)
    before = gated_compile.STATS.compiled
    fam.compile(cfg, p)
    assert gated_compile.STATS.compiled == before + 1
    assert len(list(tmp_path.glob("hopper_gemm_gated-*.o"))) == 1


@pytest.mark.compile
def test_the_gated_epilogue_multiplies_by_c(tmp_path) -> None:  # noqa: ANN001
    """The override takes: per accumulator element one C load (bf16) and two float multiplies
    (alpha, then C), and no fused multiply-add (the additive epilogue's x + beta * C)."""
    pytest.importorskip("cutlass")
    import re
    from collections import Counter

    from autocutlass.kernels.hopper_gemm.check import kernel_problem
    from autocutlass.kernels.hopper_gemm.plan import make_plan
    from autocutlass.kernels.hopper_gemm_gated import compile as gated_compile

    cfg = HopperGemmConfig(128, 128, 64, store=Store.DIRECT)
    p = GemmProblem(m=256, n=256, k=256, c_dtype=DType.BF16, b_major=Major.COL,
                    epilogue=Epilogue(with_c=True, c_mul=True))  # fmt: skip
    ptx = gated_compile._compile(make_plan(cfg, kernel_problem(p, cfg)), 2, ptx_dir=tmp_path).__ptx__
    count = Counter(re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)\s", ptx, re.MULTILINE))
    loads = count["ld.global.b16"]
    assert loads > 0 and count["mul.f32"] == 2 * loads and count["fma.rn.f32"] == 0, count
