"""``linear(x, w, bias, activation="swiglu")``: silu(x W_gate^T + b_gate) * (x W_up^T + b_up) of a
packed weight cat([W_gate, W_up]). Its semantics against torch (the CPU fallback), errors,
gradients (float64 gradcheck through the graph path and through the op's own formula), opcheck,
torch.compile (one op while inferring, the op without SwiGLU while training), dispatch with the
fake family (the launch gets the packed (K, 2N) B, an (M, N) D and the (2N,) bias), the problem's
key (unchanged for every other epilogue), the evaluation reference, ``GatedMLP``'s packing, and
the ``hopper_gemm_swiglu`` family: its gate, rules with reasons, space, seeds, and sampled
configs compiling for sm_90a (CUTE_DSL_ARCH=sm_90a)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from _dispatch_fakes import calls, make_rig
from torch import nn
from torch._dynamo.testing import AotEagerAndRecordGraphs
from torch._dynamo.utils import counters
from torch.autograd import gradcheck
from torch.library import opcheck

import autocutlass
from autocutlass import torch_ops  # noqa: F401  (registers the ops)
from autocutlass.kernels import families_for, get_family, unsupported_reason
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, Schedule, SplitMode, Store
from autocutlass.nn.gated import GatedMLP, swap_gated_mlp_, unswap_gated_mlp_
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major
from autocutlass.ops.registry import problem_from_dict
from autocutlass.ops.types import Activation, Epilogue
from autocutlass.settings import Policy

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
BF, F64 = torch.bfloat16, torch.float64


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:  # noqa: ANN001
    for name in ("AUTOCUTLASS_POLICY", "AUTOCUTLASS_SWIGLU_KERNELS", "AUTOCUTLASS_STRICT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    autocutlass.reset()
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    autocutlass.reset()


def ref(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    n = w.shape[0] // 2
    return F.silu(F.linear(x, w[:n], None if b is None else b[:n])) * F.linear(x, w[n:], None if b is None else b[n:])


# ---- semantics and errors (CPU: torch computes) ------------------------------------------------
@pytest.mark.parametrize("with_bias", [False, True])
def test_swiglu_is_silu_gate_times_up(with_bias: bool) -> None:
    x, w = torch.randn(2, 5, 16), torch.randn(24, 16)
    b = torch.randn(24) if with_bias else None
    y = autocutlass.linear(x, w, b, activation="swiglu")
    assert y.shape == (2, 5, 12)
    torch.testing.assert_close(y, ref(x, w, b))
    torch.testing.assert_close(autocutlass.linear(x[0, 0], w, b, activation="swiglu"), ref(x[0, 0], w, b))  # 1-D x


def test_swiglu_errors_name_the_problem() -> None:
    x = torch.randn(5, 16)
    with pytest.raises(ValueError, match=r"\(2N, K\) weight.*got weight \(23, 16\)"):
        autocutlass.linear(x, torch.randn(23, 16), activation="swiglu")
    with pytest.raises(ValueError, match="takes no residual="):
        autocutlass.linear(x, torch.randn(24, 16), activation="swiglu", residual=torch.randn(5, 12))
    with pytest.raises(ValueError, match="takes no mul="):
        autocutlass.linear(x, torch.randn(24, 16), activation="swiglu", mul=torch.randn(5, 12))
    with pytest.raises(RuntimeError, match="not compatible"):  # a K mismatch: torch's error, as without SwiGLU
        autocutlass.linear(x, torch.randn(24, 15), activation="swiglu")
    with pytest.raises(ValueError, match=r"\(23, 16\)"):  # the graph path raises the same
        autocutlass.linear(x.requires_grad_(), torch.randn(23, 16), activation="swiglu")
    with pytest.raises(ValueError, match="'swiglu'"):  # the choices listed for linear
        autocutlass.linear(x, torch.randn(24, 16), activation="swish")
    with pytest.raises(ValueError, match="is not one of"):  # other ops do not take it
        autocutlass.scaled_mm(torch.randn(4, 16).to(torch.float8_e4m3fn), torch.randn(16, 16).to(torch.float8_e4m3fn).t(),
                              torch.ones(()), torch.ones(()), out_dtype=BF, activation="swiglu")  # fmt: skip


# ---- gradients and the op ----------------------------------------------------------------------
def test_gradients_through_the_graph_path() -> None:
    x, w, b = (torch.randn(*s, dtype=F64, requires_grad=True) for s in ((2, 3, 8), (12, 8), (12,)))
    assert gradcheck(lambda x, w, b: autocutlass.linear(x, w, b, activation="swiglu"), (x, w, b))
    assert gradcheck(lambda x, w: autocutlass.linear(x, w, activation="swiglu"), (x, w))


def test_the_op_with_swiglu_passes_opcheck_and_its_own_backward() -> None:
    args = (torch.randn(5, 8, dtype=F64, requires_grad=True), torch.randn(12, 8, dtype=F64, requires_grad=True),
            torch.randn(12, dtype=F64, requires_grad=True), "swiglu")  # fmt: skip
    opcheck(torch.ops.autocutlass.linear.default, args)
    assert gradcheck(lambda x, w, b: torch.ops.autocutlass.linear(x, w, b, "swiglu"), args[:3])
    y = torch.ops.autocutlass.linear(*args)
    assert y.shape == (5, 6)


# ---- torch.compile -----------------------------------------------------------------------------
def test_inference_compiles_to_one_op_with_swiglu() -> None:
    backend = AotEagerAndRecordGraphs()
    w, b = torch.randn(24, 16), torch.randn(24)
    x = torch.randn(3, 16)
    with torch.no_grad():
        y = torch.compile(lambda x: autocutlass.linear(x, w, b, activation="swiglu"), backend=backend, fullgraph=True)(x)
    assert not counters["graph_break"]
    ops = [n for n in backend.fw_graphs[0].graph.nodes if str(n.target) == "autocutlass.linear.default"]
    assert len(ops) == 1 and ops[0].args[3] == "swiglu"
    torch.testing.assert_close(y, ref(x, w, b))


def test_training_compiles_with_swiglu_outside_the_op() -> None:
    backend = AotEagerAndRecordGraphs()
    w = torch.randn(24, 16, requires_grad=True)
    x = torch.randn(3, 16, requires_grad=True)
    torch.compile(lambda x: autocutlass.linear(x, w, activation="swiglu"), backend=backend,
                  fullgraph=True)(x).square().mean().backward()  # fmt: skip
    assert not counters["graph_break"]
    ops = [n for n in backend.fw_graphs[0].graph.nodes if str(n.target) == "autocutlass.linear.default"]
    assert ops and all(n.args[3] is None for n in ops)  # the (M, 2N) product; SwiGLU in torch
    xr, wr = (t.detach().clone().requires_grad_() for t in (x, w))
    ref(xr, wr, None).square().mean().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


# ---- dispatch (the fake family computes the kernel's epilogue) ---------------------------------
@pytest.mark.parametrize("with_bias", [False, True])
def test_the_launch_gets_the_packed_weight_and_a_half_width_d(with_bias: bool) -> None:
    rig = make_rig(Policy.HEURISTIC)
    x, w = torch.randn(2, 20, 64).to(BF), torch.randn(192, 64).to(BF)
    b = torch.randn(192).to(BF) if with_bias else None
    y = calls(rig.dispatcher).linear(x, w, b, "swiglu")
    assert y.shape == (2, 20, 96)
    torch.testing.assert_close(y.float(), ref(x.float(), w.float(), None if b is None else b.float()), atol=6e-2, rtol=2e-2)
    launch = rig.family.launches[-1]
    ep = launch.problem.epilogue
    assert ep.swiglu and ep.activation is Activation.SILU and not ep.with_c and ep.bias == with_bias
    assert launch.problem.n == 192 and launch.d.shape == (40, 96) and launch.b.shape == (64, 192)
    calls(rig.dispatcher).linear(x, w, b, "silu")  # plain silu: another memo entry, no SwiGLU
    assert not rig.family.launches[-1].problem.epilogue.swiglu and rig.family.launches[-1].d.shape == (40, 192)


# ---- the problem, its key and its evaluation ---------------------------------------------------
def test_other_epilogues_keep_their_keys() -> None:
    kw = dict(m=64, n=128, k=64, b_major=Major.COL)
    plain = GemmProblem(**kw, epilogue=Epilogue(bias=True, activation=Activation.SILU))  # type: ignore[arg-type]
    assert plain.key() == (
        '{"a_dtype":"bf16","a_major":"row","acc_dtype":"fp32","align_a":16,"align_b":16,"align_c":16,"align_d":16,'
        '"b_dtype":"bf16","b_major":"col","c_dtype":null,"d_dtype":"bf16","epilogue":{"activation":"silu",'
        '"bias":true,"with_c":false},"k":64,"l":1,"m":64,"n":128,"op":"gemm","v":1}'
    )  # byte-identical to the key before SwiGLU existed
    sw = GemmProblem(**kw, epilogue=Epilogue(bias=True, activation=Activation.SILU, swiglu=True))  # type: ignore[arg-type]
    assert sw.as_dict()["epilogue"]["swiglu"] is True and sw.key() != plain.key()
    assert sw.bucket_key() != plain.bucket_key() and sw.neighbour_key() != plain.neighbour_key()
    assert sw.kernel_class_key() != plain.kernel_class_key()
    assert problem_from_dict(sw.as_dict()) == sw and problem_from_dict(plain.as_dict()) == plain
    assert sw.d_cols == 64 and plain.d_cols == 128 and sw.min_bytes < plain.min_bytes and sw.flops == plain.flops
    with pytest.raises(ValueError, match="swiglu"):
        Epilogue(swiglu=True)  # needs SILU
    with pytest.raises(ValueError, match="swiglu"):
        Epilogue(with_c=True, activation=Activation.SILU, swiglu=True)


def test_the_evaluation_reference_is_silu_gate_times_up() -> None:
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, torch_baseline

    p = GemmProblem(m=33, n=96, k=40, b_major=Major.COL,
                    epilogue=Epilogue(bias=True, activation=Activation.SILU, swiglu=True))  # fmt: skip
    inputs = make_inputs(p, device="cpu")
    assert inputs.d.shape == (33, 48) and inputs.bias is not None and inputs.bias.shape == (96,)
    want = ref(inputs.a.float(), inputs.b.float().t(), inputs.bias.float())
    torch.testing.assert_close(reference(p, inputs), want)
    torch_baseline(p, inputs)()
    torch.testing.assert_close(inputs.d.float(), want, atol=6e-2, rtol=2e-2)


# ---- GatedMLP ----------------------------------------------------------------------------------
class _MLP(nn.Module):
    def __init__(self, act: nn.Module, bias: bool) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(16, 24, bias=bias), nn.Linear(16, 24, bias=bias)
        self.down_proj, self.act_fn = nn.Linear(24, 16, bias=bias), act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


@pytest.mark.parametrize("bias", [False, True])
def test_gated_mlp_packs_gate_and_up_when_swiglu_is_on(monkeypatch: pytest.MonkeyPatch, bias: bool) -> None:
    monkeypatch.setenv("AUTOCUTLASS_SWIGLU_KERNELS", "1")
    model = nn.Sequential(_MLP(nn.SiLU(), bias))
    x = torch.randn(3, 16)
    keys, want = dict(model.state_dict()), model(x)
    keys = {k: v.clone() for k, v in keys.items()}
    mlp = model[0]
    gate_param = mlp.gate_proj.weight
    swap_gated_mlp_(model)
    new = model[0]
    assert isinstance(new, GatedMLP) and new._packed_views() is not None
    assert new.gate_proj.weight is gate_param  # the same Parameter, now a view of the packed tensor
    state = model.state_dict()
    assert list(state) == list(keys) and all(torch.equal(state[k], keys[k]) for k in keys)
    packed = new._packed_views()
    assert packed is not None and packed[0].shape == (48, 16)
    with torch.no_grad():
        torch.testing.assert_close(model(x), want)
    with torch.no_grad():  # an in-place update of a parameter is the packed tensor's
        new.up_proj.weight.mul_(2)
        assert torch.equal(packed[0][24:], new.up_proj.weight)
        torch.testing.assert_close(model(x), unswap_gated_mlp_(model)(x))
    assert isinstance(model[0], _MLP)


def test_gated_mlp_serves_nothing_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_SWIGLU_KERNELS", "1")
    model = swap_gated_mlp_(nn.Sequential(_MLP(nn.SiLU(), True)))
    new = model[0]
    assert new._packed_views() is not None
    fresh = _MLP(nn.SiLU(), True)
    model.load_state_dict({"0." + k: v for k, v in fresh.state_dict().items()}, assign=True)  # new parameters
    assert new._packed_views() is None  # no longer views: the two-GEMM path serves
    x = torch.randn(3, 16)
    with torch.no_grad():
        torch.testing.assert_close(model(x), fresh(x))
    # while autograd records, the two parameters get their gradients
    model2 = swap_gated_mlp_(nn.Sequential(_MLP(nn.SiLU(), False)))
    model2(x).sum().backward()
    assert model2[0].gate_proj.weight.grad is not None and model2[0].up_proj.weight.grad is not None


def test_gated_mlp_keeps_two_gemms_when_off_or_not_silu(monkeypatch: pytest.MonkeyPatch) -> None:
    on = swap_gated_mlp_(nn.Sequential(_MLP(nn.SiLU(), False)))
    assert on[0]._packed is not None  # AUTOCUTLASS_SWIGLU_KERNELS unset: on by default
    monkeypatch.setenv("AUTOCUTLASS_SWIGLU_KERNELS", "0")
    off = swap_gated_mlp_(nn.Sequential(_MLP(nn.SiLU(), False)))
    assert off[0]._packed is None
    monkeypatch.delenv("AUTOCUTLASS_SWIGLU_KERNELS")
    gelu = swap_gated_mlp_(nn.Sequential(_MLP(nn.GELU(), False)))
    assert isinstance(gelu[0], GatedMLP) and gelu[0]._packed is None


# ---- the family ---------------------------------------------------------------------------------
def _swiglu(m: int = 4096, n_out: int = 14336, **kw: object) -> GemmProblem:
    kw.setdefault("b_major", Major.COL)
    return GemmProblem(m=m, n=2 * n_out, k=4096, epilogue=Epilogue(activation=Activation.SILU, swiglu=True), **kw)  # type: ignore[arg-type]  # fmt: skip


def test_the_swiglu_family_alone_serves_swiglu_and_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _swiglu()
    for other in ("hopper_gemm", "hopper_gemm_gated"):
        assert get_family(other).supports(p) is not None
    assert [f.name for f in families_for(p)] == ["hopper_gemm_swiglu"]  # on by default: GPU tests passed
    monkeypatch.setenv("AUTOCUTLASS_SWIGLU_KERNELS", "0")
    assert families_for(p) == []
    why = unsupported_reason(p)
    assert "hopper_gemm_swiglu: switched off by AUTOCUTLASS_SWIGLU_KERNELS=0" in why
    monkeypatch.delenv("AUTOCUTLASS_SWIGLU_KERNELS")
    plain = GemmProblem(m=4096, n=2 * 14336, k=4096, b_major=Major.COL)
    assert "hopper_gemm_swiglu" not in [f.name for f in families_for(plain)]
    fam = get_family("hopper_gemm_swiglu")
    assert fam.source_hash() not in (get_family("hopper_gemm").source_hash(), get_family("hopper_gemm_gated").source_hash())


@pytest.mark.parametrize(("config", "problem", "reason"), [
    (HopperGemmConfig(128, 256, 64), _swiglu(n_out=1000), "not a multiple of tile_n/2=128"),
    (HopperGemmConfig(128, 160, 64), _swiglu(), "tile_n=160 is not one of"),
    (HopperGemmConfig(128, 128, 64, swap_ab=True), _swiglu(m=8), "swap_ab"),
    (HopperGemmConfig(128, 128, 64, split_k=2), _swiglu(m=8), "split-K"),
    (HopperGemmConfig(128, 128, 64, split_k=2, split_mode=SplitMode.WORKSPACE), _swiglu(m=8), "split-K"),
    (HopperGemmConfig(128, 128, 64), _swiglu(b_major=Major.ROW), "K-major"),
    (HopperGemmConfig(128, 128, 32), _swiglu(a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32), "tf32"),
    (HopperGemmConfig(128, 128, 64), _swiglu(align_d=8), "D is only 8-byte aligned"),
    (HopperGemmConfig(256, 256, 64, schedule=Schedule.PINGPONG), _swiglu(), "ping-pong tile_m=256"),
    (HopperGemmConfig(192, 128, 64), _swiglu(), "gate half"),
])  # fmt: skip
def test_configs_are_refused_with_reasons(config: HopperGemmConfig, problem: GemmProblem, reason: str) -> None:
    why = get_family("hopper_gemm_swiglu").check(config, problem)
    assert why is not None and reason in why, why


def test_odd_packed_rows_are_refused() -> None:
    p = GemmProblem(m=64, n=2 * 64 + 1, k=64, b_major=Major.COL,
                    epilogue=Epilogue(activation=Activation.SILU, swiglu=True))  # fmt: skip
    assert "not an even number" in (get_family("hopper_gemm_swiglu").supports(p) or "")


@pytest.mark.parametrize("m", [1, 64, 4096])
def test_space_and_seeds_pass_check(m: int) -> None:
    fam = get_family("hopper_gemm_swiglu")
    p = _swiglu(m=m)
    space = fam.space(p)
    assert space and all(fam.check(c, p) is None for c in space)
    assert not any(c.swap_ab or c.split_k > 1 or c.n_split for c in space) and {c.tile_n for c in space} <= {64, 128, 192, 256}
    assert any(c.store is Store.DIRECT for c in space) == (m <= 256)
    seeds = fam.seeds(p)
    assert seeds and all(fam.check(c, p) is None for c in seeds) and seeds[0].tile_n in (128, 256)


SWIGLU_CONFIGS = {
    "coop tma bias c2x1": (HopperGemmConfig(128, 256, 64, cluster_m=2), True),
    "pingpong direct": (HopperGemmConfig(64, 128, 64, schedule=Schedule.PINGPONG, store=Store.DIRECT), False),
    "stream-k bias": (HopperGemmConfig(128, 128, 64, stream_k=True), True),
}


@pytest.mark.compile
@pytest.mark.parametrize("name", sorted(SWIGLU_CONFIGS))
def test_swiglu_configs_compile(name: str, tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("cutlass")
    from autocutlass.kernels.hopper_gemm_swiglu import HopperGemmSwigluFamily
    from autocutlass.kernels.hopper_gemm_swiglu import compile as swiglu_compile

    cfg, bias = SWIGLU_CONFIGS[name]
    p = GemmProblem(m=4096, n=2 * 4096, k=4096, b_major=Major.COL,
                    epilogue=Epilogue(bias=bias, activation=Activation.SILU, swiglu=True))  # fmt: skip
    fam = HopperGemmSwigluFamily(tmp_path)
    assert fam.check(cfg, p) is None, fam.check(cfg, p)
    before = swiglu_compile.STATS.compiled
    fam.compile(cfg, p)
    assert swiglu_compile.STATS.compiled == before + 1
    assert len(list(tmp_path.glob("hopper_gemm_swiglu-*.o"))) == 1


@pytest.mark.compile
@pytest.mark.parametrize("store", [Store.TMA, Store.DIRECT])
def test_the_swiglu_kernel_reads_b_in_one_box_and_stores_half(store: Store, tmp_path) -> None:  # noqa: ANN001
    """The overrides take: B comes by a 4-D TMA box (rows j, half, K, tile), A by a 2-D one; per
    output element one silu (one ex2); the stores write the gate half only (TMA: h / 32 chunks of
    the 128x128 tile, i.e. 2; direct: one 16-bit store per output element a thread holds, 32)."""
    pytest.importorskip("cutlass")
    import re
    from collections import Counter

    from autocutlass.kernels.hopper_gemm_swiglu import compile as swiglu_compile

    cfg = HopperGemmConfig(128, 128, 64, store=store)
    p = GemmProblem(m=256, n=512, k=256, b_major=Major.COL,
                    epilogue=Epilogue(bias=True, activation=Activation.SILU, swiglu=True))  # fmt: skip
    ptx = swiglu_compile._compile(swiglu_compile.kernel_plan(cfg, p), 2, ptx_dir=tmp_path).__ptx__
    count = Counter(re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.:]*)\s", ptx, re.MULTILINE))
    loads = {k: v for k, v in count.items() if k.startswith("cp.async.bulk.tensor") and ".global.tile.mbarrier" in k}
    assert any(k.startswith("cp.async.bulk.tensor.4d") for k in loads), loads
    assert any(k.startswith("cp.async.bulk.tensor.2d") for k in loads), loads
    assert count["ex2.approx.ftz.f32"] == 32, count  # 128x128 over 256 threads: 64 values, 32 outputs
    if store is Store.TMA:
        assert sum(v for k, v in count.items() if k.startswith("cp.async.bulk.tensor.2d.global.shared")) == 2, count
    else:
        assert count["st.global.b16"] == 32, count
