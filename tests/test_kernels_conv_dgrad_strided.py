"""The strided conv dgrad family without a GPU: the stride-phase decomposition checked numerically
against torch's input gradient (each phase run as torch's own stride-1 convolution of the padded
dy with the phase's sub-filter, written through the phase's view of dx), its reasons, space,
seeds and config mapping, the runner's phases and kept sub-filters, and (marker ``compile``)
sampled configs compiled with CUTE_DSL_ARCH=sm_90a."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
import torch
import torch.nn.functional as F

from _conv_helpers import dsl_available
from autocutlass.device import KERNELS_DIR, source_hash
from autocutlass.kernels import families_for, get_family, source_hashes, unsupported_reason
from autocutlass.kernels.hopper_conv import HopperConvConfig as C
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES as FPROP_SOURCES
from autocutlass.kernels.hopper_conv_dgrad_strided import HopperConvDgradStridedFamily, scatter_config, sources
from autocutlass.kernels.hopper_conv_dgrad_strided.phases import (
    axis_phases,
    phase_band,
    phase_problem,
    phase_view,
    phase_weight,
    phases,
    unsupported,
)
from autocutlass.kernels.hopper_conv_dgrad_strided.runner import StridedDgradRunner
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.types import DType, Epilogue

CL = torch.channels_last
FAMILY = HopperConvDgradStridedFamily()


def dgrad(**kw: object) -> ConvProblem:
    base: dict[str, object] = {"direction": "dgrad", "n": 32, "h": 56, "w": 56, "c": 128, "k": 128, "r": 3, "s": 3,
                               "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}  # fmt: skip
    base.update(kw)
    return ConvProblem(**base)  # type: ignore[arg-type]


def _by_phases(p: ConvProblem, dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """dx as the runner computes it, every phase by torch (float64): a NaN left means a pixel no
    phase wrote."""
    dx = torch.full((p.n, p.c, p.h, p.w), float("nan"), dtype=dy.dtype).contiguous(memory_format=CL)
    for ph in phases(p):
        if ph.empty:
            continue
        view = phase_view(dx, p, ph)
        if ph.zero:
            view.zero_()
            continue
        lo_h, hi_h, lo_w, hi_w = ph.pads
        band = phase_band(dy.permute(0, 2, 3, 1), ph).permute(0, 3, 1, 2)
        out = F.conv2d(F.pad(band, (lo_w, hi_w, lo_h, hi_h)), phase_weight(w, p, ph))
        assert tuple(out.shape[2:]) == (ph.h.rows, ph.w.rows)
        view.copy_(out.permute(0, 2, 3, 1))
    return dx


GEOMETRIES = [
    # (H, W, R, S, stride, pad): ResNet's 3x3 and 1x1 stride 2 (even and odd sizes), 2x2 patch
    # merging, 3x3 unpadded, 4x4 stride 2 pad 1, stride 3 and mixed strides, R != S, 7x7 stem;
    # paddings past the filter and strides above it (phases reading a band of dy, or nothing).
    (56, 56, 3, 3, (2, 2), (1, 1)), (7, 9, 3, 3, (2, 2), (1, 1)), (14, 14, 1, 1, (2, 2), (0, 0)),
    (15, 13, 1, 1, (2, 2), (0, 0)), (8, 8, 2, 2, (2, 2), (0, 0)), (9, 10, 3, 3, (2, 2), (0, 0)),
    (16, 12, 4, 4, (2, 2), (1, 1)), (13, 11, 3, 3, (3, 3), (1, 1)), (12, 11, 5, 3, (2, 1), (2, 1)),
    (10, 12, 7, 7, (2, 2), (3, 3)), (11, 9, 3, 1, (3, 2), (1, 0)), (5, 5, 5, 5, (4, 4), (2, 2)),
    (9, 8, 1, 1, (2, 2), (1, 1)), (12, 12, 2, 2, (3, 3), (1, 0)),
]  # fmt: skip


@pytest.mark.parametrize("geo", GEOMETRIES, ids=[str(g) for g in GEOMETRIES])
def test_the_phases_add_up_to_the_input_gradient(geo: tuple) -> None:
    h, w, r, s, stride, pad = geo
    p = dgrad(n=2, h=h, w=w, c=8, k=16, r=r, s=s, stride_h=stride[0], stride_w=stride[1], pad_h=pad[0], pad_w=pad[1])
    assert unsupported(p) is None, unsupported(p)
    g = torch.Generator().manual_seed(sum(geo[:4]))
    x = torch.randn(p.n, p.c, p.h, p.w, dtype=torch.float64, generator=g, requires_grad=True)
    wt = torch.randn(p.k, p.c, p.r, p.s, dtype=torch.float64, generator=g)
    y = F.conv2d(x, wt, stride=stride, padding=pad)
    dy = torch.randn(y.shape, dtype=torch.float64, generator=g)
    y.backward(dy)
    torch.testing.assert_close(_by_phases(p, dy, wt), x.grad, rtol=1e-10, atol=1e-10)
    # every tap serves exactly one phase; every dx pixel sits in exactly one phase
    computed = [ph for ph in phases(p) if ph.computed]
    assert sum(ph.h.taps * ph.w.taps for ph in phases(p) if not ph.empty) == p.r * p.s or p.h < p.stride_h
    assert sum(ph.h.rows * ph.w.rows for ph in phases(p)) == p.h * p.w
    for ph in computed:
        assert (phase_problem(p, ph).p, phase_problem(p, ph).q) == (ph.h.rows, ph.w.rows)


def test_axis_phases_of_resnet_layers() -> None:
    # 3x3 stride 2 pad 1 on 56 rows: even rows take the middle tap, odd rows the outer two, dy padded after
    even, odd = axis_phases(56, 28, 3, 2, 1)
    assert (even.r0, even.taps, even.lo, even.hi, even.rows) == (1, 1, 0, 0, 28)
    assert (odd.r0, odd.taps, odd.lo, odd.hi, odd.rows) == (0, 2, 0, 1, 28)
    # 1x1 stride 2: odd rows receive nothing
    even, odd = axis_phases(14, 7, 1, 2, 0)
    assert even.taps == 1 and odd.taps == 0
    p = dgrad(h=14, w=14, r=1, s=1, pad_h=0, pad_w=0)
    assert [(ph.computed, ph.zero) for ph in phases(p)] == [(True, False)] + [(False, True)] * 3


@pytest.mark.parametrize(("problem", "needle"), [
    (dgrad(stride_h=1, stride_w=1), "stride 1x1"),
    (dgrad(direction="wgrad"), "dgrad only"),
    (dgrad(groups=2), "groups=2"),
    (dgrad(dil_h=2), "dilation 2x1"),
    (dgrad(epilogue=Epilogue(bias=True)), "no epilogue"),
    (dgrad(c=3), "K=3 output channels"),  # dx's channels are the phases' output channels
    (dgrad(k=12), "w is only 8-byte aligned"),  # the sub-filters' rows: 12 channels
    (dgrad(x_dtype=DType.TF32, w_dtype=DType.TF32, y_dtype=DType.FP32), "tf32"),
])  # fmt: skip
def test_problem_reasons(problem: ConvProblem, needle: str) -> None:
    reason = FAMILY.supports(problem)
    assert reason is not None and needle in reason, reason
    assert FAMILY.check(C(), problem) is not None and FAMILY.seeds(problem) == [] == FAMILY.space(problem)


def test_configs_sum_splits_serially_and_serve_from_records_only() -> None:
    p = dgrad()
    assert FAMILY.check(C(), p) is None and FAMILY.check(C(store="direct"), p) is None
    assert "SERIAL" in (FAMILY.check(C(split_k=2, split_mode="workspace"), p) or "")
    assert scatter_config(C(split_k=2, split_mode="workspace")) == C(split_k=2)
    assert FAMILY.TUNED_ONLY  # a layer never tuned runs on cuDNN


def test_192_row_tiles_are_refused_by_the_scatter_store() -> None:
    # the fprop kernel's 192-row tiles split columns between two epilogues; the scatter store walks one
    p = dgrad(n=128, h=28, w=28, c=256, k=256)
    assert HopperConvFamily().check(C(192, 256, 64), phase_problem(p, max(
        (ph for ph in phases(p) if ph.computed), key=lambda ph: ph.h.taps * ph.w.taps))) is None
    assert "tile_m=192" in (FAMILY.check(C(192, 256, 64), p) or "")
    assert all(c.tile_m != 192 for c in FAMILY.space(p))


SUITE = [
    dgrad(),  # rn50-l2-3x3-s2
    dgrad(n=128, h=28, w=28, c=256, k=256),  # ResNet-50 stage 3's first 3x3 at batch 128
    dgrad(h=56, w=56, c=256, k=512, r=1, s=1, pad_h=0, pad_w=0),  # stage 2's downsample
    dgrad(n=8, h=64, w=64, c=320, k=320),  # a UNet's downsampling 3x3
]


@pytest.mark.parametrize("problem", SUITE, ids=[p.describe() for p in SUITE])
def test_space_and_seeds_are_the_largest_phases_mapped(problem: ConvProblem) -> None:
    assert FAMILY.supports(problem) is None
    seeds, space = FAMILY.seeds(problem), FAMILY.space(problem)
    assert seeds and set(seeds) <= set(space)
    assert all(c.split_mode.value == "serial" for c in space)
    assert len(set(space)) == len(space)
    largest = max((ph for ph in phases(problem) if ph.computed), key=lambda ph: ph.h.taps * ph.w.taps)
    fprop = HopperConvFamily()
    mapped = {scatter_config(c) for c in fprop.space(phase_problem(problem, largest))}
    both = mapped | {dataclasses.replace(c, store="direct" if c.store.value == "tma" else "tma") for c in mapped}
    assert set(space) <= both and {c.store.value for c in space} == {"tma", "direct"}
    for cfg in random.Random(3).sample(space, 20):
        assert FAMILY.check(cfg, problem) is None
        assert FAMILY.config_from_dict(FAMILY.config_to_dict(cfg)) == cfg


def test_registry_serves_strided_dgrad_with_this_family_when_switched_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOCUTLASS_CONV_DGRAD", raising=False)
    monkeypatch.delenv("AUTOCUTLASS_CONV_DGRAD_STRIDED", raising=False)
    assert families_for(dgrad()) == []  # off by default: cuDNN
    assert "AUTOCUTLASS_CONV_DGRAD_STRIDED=1" in unsupported_reason(dgrad())
    monkeypatch.setenv("AUTOCUTLASS_CONV_DGRAD_STRIDED", "1")
    assert [f.name for f in families_for(dgrad())] == ["hopper_conv_dgrad_strided"]
    assert [f.name for f in families_for(dgrad(stride_h=1, stride_w=1))] == ["hopper_conv_dgrad"]


def test_source_files_and_hash() -> None:
    assert set(FPROP_SOURCES) < set(sources.SOURCE_FILES)
    for rel in sources.SOURCE_FILES:
        assert (KERNELS_DIR / rel).is_file(), rel
    assert FAMILY.source_hash() == source_hash(sources.SOURCE_FILES) == source_hashes()["hopper_conv_dgrad_strided"]
    assert get_family("hopper_conv_dgrad_strided").source_hash() != get_family("hopper_conv_dgrad").source_hash()


class _FakeKernel:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, dy, w, view, work, count, lo_h, hi_h, lo_w, hi_w, clusters) -> None:  # type: ignore[no-untyped-def]
        self.calls.append((w, (lo_h, hi_h, lo_w, hi_w), tuple(view.shape), view.stride(), w.data_ptr(), clusters))
        view.fill_(1.0)


def _fake_runner(monkeypatch: pytest.MonkeyPatch, p: ConvProblem) -> tuple[StridedDgradRunner, _FakeKernel]:
    from autocutlass.kernels.hopper_conv_dgrad_strided import runner as runner_mod

    fake = _FakeKernel()
    monkeypatch.setattr(runner_mod, "get_compiled", lambda plan, cache_dir: fake)
    monkeypatch.setattr(runner_mod, "max_active_clusters", lambda dev, size: 132)
    return runner_mod.StridedDgradRunner(C(store="direct"), p, None), fake


def test_the_runner_launches_each_phase_and_zeroes_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    p = dgrad(n=1, h=6, w=5, c=8, k=16, r=1, s=1, pad_h=0, pad_w=0)
    r, fake = _fake_runner(monkeypatch, p)
    w = torch.randn(16, 8, 1, 1).contiguous(memory_format=CL)
    dy = torch.randn(1, 16, p.p, p.q).contiguous(memory_format=CL)
    dx = torch.full((1, 8, 6, 5), float("nan")).contiguous(memory_format=CL)
    r(dy, w, dx)
    assert len(fake.calls) == 1 and fake.calls[0][2] == (1, 3, 3, 8)  # phase (0, 0): rows 0, 2, 4; columns 0, 2, 4
    assert fake.calls[0][3] == (6 * 5 * 8, 2 * 5 * 8, 2 * 8, 1)  # every other pixel of every other row
    expect = torch.zeros(1, 8, 6, 5)
    expect[:, :, ::2, ::2] = 1.0
    assert torch.equal(dx, expect)  # no pixel left unwritten, the odd phases zero


def test_the_runner_keeps_the_sub_filters_per_weight_version(monkeypatch: pytest.MonkeyPatch) -> None:
    p = dgrad(n=1, h=6, w=6, c=8, k=16)
    r, fake = _fake_runner(monkeypatch, p)
    w = torch.randn(16, 8, 3, 3).contiguous(memory_format=CL)
    dy, dx = torch.randn(1, 16, 3, 3), torch.empty(1, 8, 6, 6).contiguous(memory_format=CL)
    r(dy, w, dx)
    r(dy, w, dx)
    assert len(fake.calls) == 8 and [c[4] for c in fake.calls[:4]] == [c[4] for c in fake.calls[4:]]  # kept
    assert [c[1] for c in fake.calls[:4]] == [(0, 0, 0, 0), (0, 0, 0, 1), (0, 1, 0, 0), (0, 1, 0, 1)]
    assert [c[5] for c in fake.calls[:4]] == [132] * 4  # one after another, each on the whole GPU
    with torch.no_grad():
        w.mul_(2)  # an optimizer step: the version moves
    r(dy, w, dx)
    assert fake.calls[8][4] != fake.calls[4][4]
    ph = phases(p)[3]
    assert torch.equal(fake.calls[11][0], phase_weight(w, p, ph).permute(0, 2, 3, 1))
    with pytest.raises(ValueError, match="dx must be a channels_last"):
        r(dy, w, torch.empty(1, 8, 6, 6))
    with pytest.raises(ValueError, match="dy shape"):
        r(torch.randn(1, 16, 4, 3), w, dx)
    # another shape of the class (a neighbour's record): its own phases, the same kernels and sub-filters
    dx2 = torch.empty(2, 8, 9, 7).contiguous(memory_format=CL)
    r(torch.randn(2, 16, 5, 4), w, dx2)
    assert [c[2] for c in fake.calls[12:]] == [(2, 5, 4, 8), (2, 5, 3, 8), (2, 4, 4, 8), (2, 4, 3, 8)]
    assert [c[4] for c in fake.calls[12:]] == [c[4] for c in fake.calls[8:12]]


# ---- compile (no GPU) ----------------------------------------------------------------------------
@pytest.mark.compile
def test_sampled_strided_dgrad_configs_compile() -> None:
    """The seed and a sampled config (serial split-K or stream-K where the space has them) of two
    strided layers compile: every phase's sub-filter class of the scatter kernel."""
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv_dgrad_strided.compile import _compile
    from autocutlass.kernels.hopper_conv_dgrad_strided.runner import phase_plan

    rng = random.Random(2026)
    for p in (dgrad(), dgrad(n=32, h=14, w=14, c=512, k=512)):
        space = FAMILY.space(p)
        splits = [c for c in space if c.split_k > 1 or c.stream_k]
        for cfg in (FAMILY.seeds(p)[0], rng.choice(splits or space)):
            plans = {phase_plan(cfg, p, ph) for ph in phases(p) if ph.computed}
            assert len(plans) == 4  # 1x1, 1x2, 2x1 and 2x2 taps
            for plan in itertools.islice(plans, 2):
                assert _compile(plan) is not None, cfg.short()
