"""The hopper_gemv family without a GPU: its config's JSON form, the problems and configs it accepts
(each rule with its reason), its space and seeds, its place in the registry and its gate, and
sampled configs of both kernels compiling with CUTE_DSL_ARCH=sm_90a."""

from __future__ import annotations

import os
import random

import pytest

from autocutlass.kernels.hopper_gemv import GemvConfig as G
from autocutlass.kernels.hopper_gemv import HopperGemvFamily, m_tile_for
from autocutlass.kernels.hopper_gemv.check import MAX_M, SIMT_MAX_M, check, problem_supported
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, GemmProblem, Major


def decode(m: int = 1, n: int = 4096, k: int = 4096, **kw: object) -> GemmProblem:
    kw.setdefault("a_major", Major.ROW)
    kw.setdefault("b_major", Major.COL)
    return GemmProblem(m=m, n=n, k=k, **kw)  # type: ignore[arg-type]


def test_config_round_trips_and_rejects_what_it_does_not_know() -> None:
    for cfg in (G(), G(8, 16, 1, 8, 2, kind="mma"), G(4, 2, 2, 2, 1)):
        assert G.from_dict(cfg.as_dict()) == cfg
    assert G.from_dict({"m_tile": 4}) == G(m_tile=4)  # fields left out take their defaults (kind simt)
    with pytest.raises(KeyError, match="tile_n"):
        G.from_dict({"tile_n": 128})
    with pytest.raises(ValueError, match="kind"):
        G.from_dict({"kind": "wgmma"})
    with pytest.raises(TypeError, match="rows"):
        G.from_dict({"rows": 2.0})


@pytest.mark.parametrize(
    ("problem", "needle"),
    [
        (decode(b_major=Major.ROW), "K-major"),
        (decode(a_major=Major.COL), "row-major"),
        (decode(a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32), "bf16"),
        (decode(a_dtype=DType.E4M3, b_dtype=DType.E4M3), "bf16"),
        (decode(l=2), "batched"),
        (decode(m=MAX_M + 1), "1..16"),
        (decode(align_a=8), "16-byte"),
        (decode(align_b=4), "16-byte"),
        # 16-byte aligned strides with K = 12: a slice x[:, :12] of a 16-column buffer (or one row,
        # whose stride is padded); the kernel reads K in whole 8-element chunks
        (decode(k=12), "multiple of 8"),
        (decode(4, k=4100), "multiple of 8"),
        (decode(c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, c_mul=True)), "multiplying"),
        (decode(n=8192, epilogue=Epilogue(activation=Activation.SILU, swiglu=True)), "SwiGLU"),
        (decode(d_dtype=DType.FP16), "D must be"),
    ],
)
def test_problems_it_refuses_say_why(problem: GemmProblem, needle: str) -> None:
    why = problem_supported(problem)
    assert why is not None and needle in why, why


@pytest.mark.parametrize(
    "problem",
    [
        decode(1), decode(16, 1000, 4104), decode(3, d_dtype=DType.FP32),
        decode(5, a_dtype=DType.FP16, b_dtype=DType.FP16, d_dtype=DType.FP16),
        decode(2, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True, activation=Activation.GELU)),
    ],
)  # fmt: skip
def test_linear_decode_problems_are_served_with_feasible_seeds(problem: GemmProblem) -> None:
    fam = HopperGemvFamily()
    assert fam.supports(problem) is None
    seeds = fam.seeds(problem)
    assert seeds and all(check(c, problem) is None for c in seeds)
    assert len(set(seeds)) == len(seeds)


@pytest.mark.parametrize(
    ("config", "problem", "needle"),
    [
        (G(m_tile=1), decode(2), "do not fit m_tile"),
        (G(m_tile=16, rows=2), decode(9), "simt kernel serves 1..8"),
        (G(8, 4, 1, 1, 1, kind="mma"), decode(4), "rows=4 is not one of (16, 32)"),
        (G(4, 16, 1, 1, 1, kind="mma"), decode(4), "m_tile=4 is not one of (8, 16)"),
        (G(8, 16, 8, 4, 1, kind="mma"), decode(4), "warps exceed 16"),
        (G(8, 8, 1, 1, 4), decode(4), "loads in flight"),
        (G(16, 8, 1, 1, 1), decode(4), "128 accumulators per lane"),
        (G(2, 3, 1, 1, 1), decode(1), "rows=3"),
        (G(kind="wgmma"), decode(1), "kind"),
    ],
)
def test_configs_it_refuses_say_why(config: G, problem: GemmProblem, needle: str) -> None:
    why = check(config, problem)
    assert why is not None and needle in why, why


@pytest.mark.parametrize("m", range(1, MAX_M + 1))
def test_space_holds_the_smallest_m_tiles_and_both_kernels_where_they_serve(m: int) -> None:
    fam = HopperGemvFamily()
    problem = decode(m)
    space = fam.space(problem)
    kinds = {c.kind for c in space}
    assert kinds == ({"simt", "mma"} if m <= SIMT_MAX_M else {"mma"})
    assert {c.m_tile for c in space if c.kind == "simt"} <= {m_tile_for(m)}
    assert {c.m_tile for c in space if c.kind == "mma"} == {8 if m <= 8 else 16}
    feasible = [c for c in space if check(c, problem) is None]
    assert len(feasible) > 20
    assert all(check(c, problem) is not None for c in space if c.warps > 16)


def test_decode_gemms_of_up_to_4_rows_are_tuned_under_it_first_and_the_gate_switches_it_off(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from autocutlass.kernels import families_for, family_names, source_hashes

    names = family_names()
    assert names.index("hopper_gemm") < names.index("hopper_gemv")
    monkeypatch.delenv("AUTOCUTLASS_GEMV_KERNELS", raising=False)
    assert [f.name for f in families_for(decode(1))] == ["hopper_gemv", "hopper_gemm"]  # on by default
    assert [f.name for f in families_for(decode(4))] == ["hopper_gemv", "hopper_gemm"]  # prefers up to 4 rows
    assert [f.name for f in families_for(decode(5))] == ["hopper_gemm", "hopper_gemv"]
    assert [f.name for f in families_for(decode(64))] == ["hopper_gemm"]
    assert [f.name for f in families_for(decode(1, b_major=Major.ROW))] == ["hopper_gemm"]
    monkeypatch.setenv("AUTOCUTLASS_GEMV_KERNELS", "0")
    assert [f.name for f in families_for(decode(1))] == ["hopper_gemm"]
    assert source_hashes()["hopper_gemv"] != source_hashes()["hopper_gemm"]


def _samples() -> list[tuple[G, GemmProblem]]:
    fam = HopperGemvFamily()
    rng = random.Random(2026)
    out = []
    for problem in (decode(1), decode(5, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True)), decode(13)):
        feasible = [c for c in fam.space(problem) if check(c, problem) is None]
        for kind in ("simt", "mma"):
            pool = [c for c in feasible if c.kind == kind]
            if pool:
                out.append((rng.choice(pool), problem))
    return out


@pytest.mark.compile
@pytest.mark.parametrize(("cfg", "prob"), _samples(), ids=lambda x: getattr(x, "short", lambda: "")())
def test_sampled_configs_compile(cfg: G, prob: GemmProblem) -> None:
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from autocutlass.kernels.hopper_gemv.compile import _compile
    from autocutlass.kernels.hopper_gemv.plan import make_plan

    assert _compile(make_plan(cfg, prob)) is not None


def test_compile_key_changes_with_what_the_kernel_is_built_from() -> None:
    from autocutlass.kernels.hopper_gemv.compile import compile_key
    from autocutlass.kernels.hopper_gemv.plan import make_plan

    p = decode(1)
    base = compile_key(make_plan(G(), p))
    assert compile_key(make_plan(G(), decode(1, n=8, k=8))) == base  # shapes are symbolic
    assert compile_key(make_plan(G(unroll=4), p)) != base
    assert compile_key(make_plan(G(), decode(1, epilogue=Epilogue(bias=True)))) != base
    assert compile_key(make_plan(G(), decode(1, d_dtype=DType.FP32))) != base


def test_runner_hands_the_kernel_2d_operands_and_only_the_epilogue_terms_compiled_in() -> None:
    import torch

    from autocutlass.kernels.hopper_gemv.runner import GemvRunner

    seen: list[tuple[object, ...]] = []
    r = GemvRunner.__new__(GemvRunner)  # the compiled function stubbed: the calling convention only
    r._with_c, r._bias, r._fn = False, True, lambda *args: seen.append(args)
    a, b, d = torch.randn(1, 3, 64), torch.randn(1, 64, 32), torch.empty(1, 3, 32)
    bias, c = torch.randn(32), torch.randn(1, 3, 32)
    r(a, b, d, c=c, bias=bias, alpha=2.0)
    args = seen[-1]
    assert [tuple(t.shape) for t in args[:3]] == [(3, 64), (64, 32), (3, 32)]
    assert args[2].data_ptr() == d.data_ptr() and args[3] is None and args[4] is bias
    assert args[5:] == (None, None, None, None, 2.0, 0.0, 1)
    with pytest.raises(ValueError, match="not batched"):
        r(torch.randn(2, 3, 64), torch.randn(2, 64, 32), torch.empty(2, 3, 32))
    assert r.direct_launch(2, 0, 3, 32, 1) == (r._fn, 1, None) and r.direct_launch(3, 0, 3, 32, 1) is None
