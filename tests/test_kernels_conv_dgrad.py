"""The Hopper conv dgrad family without a GPU: the stride-1 dgrad as a forward convolution (the
mapping checked numerically against torch's input gradient), its reasons, space, seeds and source
hash, the transformed filter kept per weight version, the registry's choice of family per
direction, and (marker ``compile``) sampled configs compiled with CUTE_DSL_ARCH=sm_90a."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch
import torch.nn.functional as F

from _conv_helpers import dsl_available
from autocutlass.device import KERNELS_DIR, source_hash
from autocutlass.kernels import families_for, family_names, get_family, source_hashes
from autocutlass.kernels.hopper_conv import HopperConvConfig as C
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES as FPROP_SOURCES
from autocutlass.kernels.hopper_conv_dgrad import HopperConvDgradFamily, sources
from autocutlass.kernels.hopper_conv_dgrad.lowering import (
    fprop_problem,
    transformed_weight,
    unsupported,
)
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.types import DType, Epilogue

CL = torch.channels_last


def dgrad(**kw: object) -> ConvProblem:
    base: dict[str, object] = {"direction": "dgrad", "n": 32, "h": 56, "w": 56, "c": 64, "k": 64, "r": 3, "s": 3,
                               "pad_h": 1, "pad_w": 1}  # fmt: skip
    base.update(kw)
    return ConvProblem(**base)  # type: ignore[arg-type]


FAMILY = HopperConvDgradFamily()


# ---- the mapping -----------------------------------------------------------------------------
@pytest.mark.parametrize("geo", [
    {"r": 3, "s": 3, "pad_h": 1, "pad_w": 1},
    {"r": 3, "s": 3, "pad_h": 0, "pad_w": 0},
    {"r": 5, "s": 3, "pad_h": 4, "pad_w": 2, "dil_h": 2, "dil_w": 2},
    {"r": 1, "s": 7, "pad_h": 0, "pad_w": 3},
    {"r": 3, "s": 3, "pad_h": 2, "pad_w": 1, "dil_h": 3},
    {"r": 1, "s": 1, "pad_h": 0, "pad_w": 0},
])  # fmt: skip
def test_stride_one_dgrad_is_a_forward_convolution(geo: dict[str, int]) -> None:
    p = dgrad(n=2, h=11, w=9, c=8, k=16, **geo)
    assert unsupported(p) is None
    f = fprop_problem(p)
    assert f.direction is ConvDirection.FPROP and (f.n, f.h, f.w, f.c, f.k) == (p.n, p.p, p.q, p.k, p.c)
    assert (f.p, f.q) == (p.h, p.w) and (f.dil_h, f.dil_w) == (p.dil_h, p.dil_w)
    w = torch.randn(p.k, p.c, p.r, p.s, dtype=torch.float64).contiguous(memory_format=CL)
    dy = torch.randn(p.n, p.k, p.p, p.q, dtype=torch.float64)
    wt = transformed_weight(w)
    assert wt.shape == (p.c, p.k, p.r, p.s) and wt.is_contiguous(memory_format=CL)
    dx = F.conv2d(dy, wt, None, 1, (f.pad_h, f.pad_w), (f.dil_h, f.dil_w))
    want = torch.nn.grad.conv2d_input((p.n, p.c, p.h, p.w), w, dy, 1, (p.pad_h, p.pad_w), (p.dil_h, p.dil_w))
    torch.testing.assert_close(dx, want)


def test_fprop_problem_alignments_follow_the_operands() -> None:
    f = fprop_problem(dgrad(c=64, k=24, align_x=16, align_y=8, x_dtype=DType.FP16, w_dtype=DType.FP16, y_dtype=DType.FP16))
    assert (f.align_x, f.align_w, f.align_y) == (8, 16, 16)  # dy's, w' (rows of 24 fp16 = 48 bytes), dx's
    assert fprop_problem(dgrad(k=20)).align_w == 8  # rows of 20 bf16 = 40 bytes


@pytest.mark.parametrize("problem,needle", [
    (dgrad(direction="fprop"), "dgrad only"),
    (dgrad(direction="wgrad"), "dgrad only"),
    (dgrad(stride_h=2), "stride 2x1: a strided dgrad"),
    (dgrad(groups=2), "groups=2"),
    (dgrad(pad_h=3), "pad_h=3 exceeds the filter's reach 2"),
    (dgrad(epilogue=Epilogue(bias=True)), "no epilogue"),
    (dgrad(c=36), "as the forward convolution of dy with the flipped filter: K=36"),
    (dgrad(k=12), "w is only 8-byte aligned"),  # the flipped filter's rows: 12 channels
    (dgrad(x_dtype=DType.TF32, w_dtype=DType.TF32, y_dtype=DType.FP32), "tf32"),
])  # fmt: skip
def test_problem_reasons(problem: ConvProblem, needle: str) -> None:
    reason = FAMILY.supports(problem)
    assert reason is not None and needle in reason, reason
    assert FAMILY.check(C(), problem) is not None and FAMILY.seeds(problem) == []


SUITE_DGRAD = [
    dgrad(),  # rn50-l1-3x3
    dgrad(c=256, k=256, h=14, w=14),  # rn50-l3-3x3
    dgrad(c=512, k=512, h=7, w=7),  # rn50-l4-3x3
    dgrad(n=8, c=640, k=640, h=32, w=32),  # sd-640@32
    dgrad(n=1, c=256, k=256, h=512, w=512),  # vae-256@512
    dgrad(k=256, r=1, s=1, pad_h=0, pad_w=0),  # rn50-l1-1x1-up
]


@pytest.mark.parametrize("problem", SUITE_DGRAD, ids=[p.describe() for p in SUITE_DGRAD])
def test_space_seeds_and_check_are_the_forward_problems(problem: ConvProblem) -> None:
    assert FAMILY.supports(problem) is None
    f = fprop_problem(problem)
    fprop = HopperConvFamily()
    assert list(FAMILY.space(problem)) == list(fprop.space(f)) and list(FAMILY.seeds(problem)) == list(fprop.seeds(f))
    seeds = FAMILY.seeds(problem)
    assert seeds and all(FAMILY.check(s, problem) is None for s in seeds)
    space = FAMILY.space(problem)
    for cfg in random.Random(7).sample(list(space), 40):
        assert FAMILY.check(cfg, problem) == fprop.check(cfg, f)
    assert FAMILY.config_from_dict(FAMILY.config_to_dict(seeds[0])) == seeds[0]


def test_registry_serves_each_direction_with_its_families(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_CONV_WGRAD", "0")  # the wgrad kernel (on by default) out of the way
    monkeypatch.setenv("AUTOCUTLASS_CONV_DGRAD", "0")
    assert [f.name for f in families_for(dgrad())] == []  # switched off
    monkeypatch.delenv("AUTOCUTLASS_CONV_DGRAD", raising=False)  # on by default
    assert family_names() == ["hopper_gemm", "hopper_conv", "hopper_conv_dgrad", "hopper_conv_dgrad_strided",
                              "hopper_conv_wgrad", "hopper_conv_unfold", "hopper_conv_wgrad_unfold", "hopper_grouped",
                              "hopper_gemm_gated", "hopper_gemm_swiglu", "hopper_gemv"]
    names = lambda p: [f.name for f in families_for(p)]
    assert names(dgrad()) == ["hopper_conv_dgrad"]
    assert names(dgrad(r=1, s=1, pad_h=0, pad_w=0)) == ["hopper_gemm", "hopper_conv_dgrad"]  # a GEMM too
    assert names(dgrad(stride_h=2, stride_w=2)) == []  # strided: cuDNN (hopper_conv_dgrad_strided is off by default)
    assert names(dataclasses.replace(dgrad(r=1, s=1, pad_h=0, pad_w=0), direction=ConvDirection.WGRAD)) == ["hopper_gemm"]
    assert names(dataclasses.replace(dgrad(), direction=ConvDirection.FPROP)) == ["hopper_conv"]


def test_source_files_and_hash() -> None:
    assert set(FPROP_SOURCES) < set(sources.SOURCE_FILES) and "hopper_conv_dgrad/lowering.py" in sources.SOURCE_FILES
    for rel in sources.SOURCE_FILES:
        assert (KERNELS_DIR / rel).is_file(), rel
    assert FAMILY.source_hash() == source_hash(sources.SOURCE_FILES) == source_hashes()["hopper_conv_dgrad"]
    assert get_family("hopper_conv_dgrad").source_hash() != get_family("hopper_conv").source_hash()


# ---- the transformed filter, kept per weight version --------------------------------------------
class _FakeFprop:
    def __init__(self) -> None:
        self.weights: list[torch.Tensor] = []

    def __call__(self, dy: torch.Tensor, w: torch.Tensor, dx: torch.Tensor) -> None:
        self.weights.append(w)


def test_the_runner_keeps_the_filter_per_weight_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.kernels.hopper_conv_dgrad import runner as runner_mod

    fake = _FakeFprop()
    monkeypatch.setattr(runner_mod, "HopperConvRunner", lambda config, problem, cache_dir: fake)
    r = runner_mod.DgradRunner(C(), dgrad(n=1, h=5, w=5, c=8, k=16), None)
    w = torch.randn(16, 8, 3, 3).contiguous(memory_format=CL)
    dy, dx = torch.randn(1, 16, 5, 5), torch.empty(1, 8, 5, 5)
    r(dy, w, dx)
    r(dy, w, dx)
    assert fake.weights[0] is fake.weights[1]  # the same weight, same version: kept
    with torch.no_grad():
        w.mul_(2)  # an optimizer step: the version moves
    r(dy, w, dx)
    assert fake.weights[2] is not fake.weights[1] and torch.equal(fake.weights[2], transformed_weight(w))
    w2 = w.detach().clone()
    r(dy, w2, dx)
    assert fake.weights[3] is not fake.weights[2]  # another weight object


# ---- compile (no GPU) ----------------------------------------------------------------------------


@pytest.mark.compile
def test_sampled_dgrad_configs_compile(tmp_path: object) -> None:
    """A seed and a sampled feasible config of two dgrad layers compile into the runner (the fprop
    kernel's class of the forward problem)."""
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv.compile import _compile
    from autocutlass.kernels.hopper_conv.plan import make_plan

    rng = random.Random(2026)
    for p in (dgrad(c=128, k=64, r=5, s=3, pad_h=2, pad_w=2, dil_w=2), dgrad(c=256, k=256, h=14, w=14, pad_h=0, pad_w=0)):
        feasible = [c for c in FAMILY.space(p) if FAMILY.check(c, p) is None]
        for cfg in (FAMILY.seeds(p)[0], rng.choice(feasible)):
            assert _compile(make_plan(cfg, fprop_problem(p))) is not None, cfg.short()
