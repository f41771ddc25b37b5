"""conv2d end to end on CPU: ConvProblem keys and bucket rule, the front-end's planning (what is
served, what falls back and why, what raises as F.conv2d raises), the pointwise lowering onto
the GEMM family's calling convention, and the conv problem being what dispatch looks up,
records and tunes. The fake family computes in fp32 with torch, so a dropped bias, a swapped
activation or a lost residual shows in the comparison with F.conv2d."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from _dispatch_fakes import FakeFamily, FakeTuner, calls, device_info, make_rig, settings
from autocutlass.dispatch import Dispatcher, Layers, _real_layers
from autocutlass.errors import UnsupportedProblem
from autocutlass.ops.compare import compare
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.problem import GemmProblem, Major
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.registry import problem_from_dict
from autocutlass.ops.types import Activation, Epilogue
from autocutlass.settings import Policy

BF = torch.bfloat16
CL = torch.channels_last


def rn50_1x1(n: int = 32, **kw) -> ConvProblem:  # noqa: ANN003
    return ConvProblem(ConvDirection.FPROP, n=n, h=14, w=14, c=1024, k=256, r=1, s=1, **kw)


# ---- the problem type ----------------------------------------------------------------------
def test_keys_round_trip_and_bucket_rule() -> None:
    p = rn50_1x1(n=24, epilogue=Epilogue(bias=True, activation=Activation.RELU))
    assert problem_from_dict(p.as_dict()) == p and p.as_dict()["op"] == "conv2d"
    assert p.bucket() == dataclasses.replace(p, n=32)  # the batch rounds up to a power of two
    assert p.bucket_key() == rn50_1x1(n=17, epilogue=p.epilogue).bucket_key()
    assert p.bucket_key() != rn50_1x1(n=33, epilogue=p.epilogue).bucket_key()
    assert dataclasses.replace(p, h=28, w=28).bucket_key() != p.bucket_key()  # spatial size stays exact
    # neighbours: everything but N, H, W; ranked by GEMM rows N*P*Q
    assert dataclasses.replace(p, n=128, h=7, w=7).neighbour_key() == p.neighbour_key()
    assert dataclasses.replace(p, k=512).neighbour_key() != p.neighbour_key()
    near, far = dataclasses.replace(p, n=16), dataclasses.replace(p, n=256)
    assert p.neighbour_distance(near) < p.neighbour_distance(far)
    assert p.key() != dataclasses.replace(p, stride_h=2).key()


def test_output_size_flops_and_lowering() -> None:
    p = ConvProblem("fprop", n=2, h=15, w=9, c=64, k=32, r=3, s=5, stride_h=2, pad_h=1, pad_w=2, dil_w=2)
    assert (p.p, p.q) == (8, 5)  # (15 + 2 - 2 - 1)//2 + 1, (9 + 4 - 8 - 1)//1 + 1
    assert p.flops == 2 * 2 * 8 * 5 * 32 * 64 * 3 * 5
    assert p.gemm_lowering() is None and not p.is_pointwise()
    g = rn50_1x1(epilogue=Epilogue(with_c=True)).gemm_lowering()
    assert g is not None and g.gemm == GemmProblem(
        m=32 * 14 * 14, n=256, k=1024, c_dtype=g.gemm.d_dtype, a_major=Major.ROW, b_major=Major.COL,
        epilogue=Epilogue(with_c=True),
    )  # fmt: skip


def test_invalid_fields_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="stride_h"):
        rn50_1x1(stride_h=0)
    with pytest.raises(ValueError, match="groups"):
        ConvProblem("fprop", n=1, h=4, w=4, c=6, k=4, r=1, s=1, groups=4)
    with pytest.raises(ValueError, match="ConvDirection"):
        ConvProblem("backward", n=1, h=4, w=4, c=8, k=8, r=1, s=1)


def test_grouped_problem_keys() -> None:
    g = GroupedGemmProblem(experts=128, t=8000, n=768, k=2048)
    assert problem_from_dict(g.as_dict()) == g and g.bucket().t == 8192
    assert g.neighbour_key() == dataclasses.replace(g, t=100).neighbour_key()
    assert g.flops == 2 * 8000 * 768 * 2048


# ---- the front-end through the dispatcher (fake GEMM family) --------------------------------
def _x(n=2, c=32, h=5, w=7) -> torch.Tensor:  # noqa: ANN001
    return torch.randn(n, c, h, w).to(BF).contiguous(memory_format=CL)


def _w(k=48, c=32, r=1, s=1) -> torch.Tensor:  # noqa: ANN001
    return (torch.randn(k, c, r, s) / 6).to(BF).contiguous(memory_format=CL)


def _ref(x, w, bias=None, residual=None, act="none", **kw) -> torch.Tensor:  # noqa: ANN001, ANN003
    y = F.conv2d(x.float(), w.float(), None if bias is None else bias.float(), **kw)
    if residual is not None:
        y = y + residual.float()
    return {"none": lambda t: t, "relu": F.relu, "silu": F.silu, "gelu": F.gelu}[act](y)


@pytest.mark.parametrize("act", [None, "relu", "silu"])
@pytest.mark.parametrize("with_bias,with_residual", [(False, False), (True, False), (True, True)])
def test_pointwise_conv_is_served_as_a_conv_problem(act, with_bias: bool, with_residual: bool) -> None:  # noqa: ANN001
    rig = make_rig(Policy.CACHED)
    x, w = _x(), _w()
    bias = torch.randn(48).to(BF) if with_bias else None
    res = torch.randn(2, 48, 5, 7).to(BF).contiguous(memory_format=CL) if with_residual else None
    y = calls(rig.dispatcher).conv2d(x, w, bias, activation=act, residual=res)
    assert rig.dispatcher.stats().fallbacks == 0 and len(rig.family.launches) == 1
    assert y.shape == (2, 48, 5, 7) and y.is_contiguous(memory_format=CL) and y.dtype is BF
    ok, why = compare(y, _ref(x, w, bias, res, act or "none"), 1e-2, "bf16")
    assert ok, why
    launch = rig.family.launches[0]
    assert launch.problem.m == 2 * 5 * 7 and (launch.problem.n, launch.problem.k) == (48, 32)
    assert launch.problem.b_major is Major.COL and launch.beta == (1.0 if with_residual else 0.0)
    # looked up and recorded as the convolution, not as its GEMM
    looked = rig.store.lookups[0]
    assert isinstance(looked, ConvProblem) and looked.epilogue.bias is with_bias
    assert isinstance(rig.misses()[0], ConvProblem)


def test_one_runner_serves_every_batch_and_resolution_of_a_layer() -> None:
    """A pointwise layer called again with another batch size or resolution reuses the runner of
    its kernel class (one compile) and computes every pixel of the new call: a runner that kept the
    first call's pixel count left later images unwritten, or failed on a smaller batch."""
    rig = make_rig(Policy.CACHED)
    w, bias = _w(), torch.randn(48).to(BF)
    d = calls(rig.dispatcher)
    for n, h, wd in ((2, 5, 7), (4, 5, 7), (1, 5, 7), (3, 9, 4)):
        x = _x(n=n, h=h, w=wd)
        y = d.conv2d(x, w, bias, activation="relu")
        ok, why = compare(y, _ref(x, w, bias, act="relu"), 1e-2, "bf16")
        assert ok, (n, h, wd, why)
    assert len(rig.family.compiled) == 1 and rig.dispatcher.stats().fallbacks == 0


def test_a_dropped_bias_or_a_swapped_activation_fails_the_comparison() -> None:
    """The tolerance the tests above use sees the mistakes they guard against."""
    x, w, bias = _x(), _w(), torch.randn(48).to(BF)
    good = _ref(x, w, bias, act="silu")
    assert not compare(_ref(x, w, None, act="silu").to(BF), good, 1e-2, "bf16")[0]
    assert not compare(_ref(x, w, bias, act="relu").to(BF), good, 1e-2, "bf16")[0]
    assert compare(good.to(BF), good, 1e-2, "bf16")[0]


def test_tune_policy_tunes_the_conv_problem() -> None:
    rig = make_rig(Policy.TUNE, tuner=FakeTuner({"tile": 64}))
    y = calls(rig.dispatcher).conv2d(_x(), _w())
    assert isinstance(rig.tuner.calls[0], ConvProblem) and rig.family.launches[0].config.tile == 64
    calls(rig.dispatcher).conv2d(_x(), _w())
    assert len(rig.tuner.calls) == 1 and rig.dispatcher.stats().memo_hits == 1 and y.shape == (2, 48, 5, 7)


@pytest.mark.parametrize(
    "kwargs,why",
    [
        (dict(w=_w(r=3, s=3), padding=1), "3x3 pad 1x1 bf16 is not a GEMM"),
        (dict(stride=2), "stride 2x2 bf16 is not a GEMM"),
        (dict(x=_x().contiguous(), w=_w().contiguous()), "channels_last"),
        (dict(w=_w(c=16), groups=2), "groups 2 bf16 is not a GEMM"),
    ],
)
def test_other_convolutions_run_cudnn_with_a_reason(kwargs, why: str, caplog) -> None:  # noqa: ANN001
    rig = make_rig(Policy.CACHED)
    x, w = kwargs.pop("x", _x()), kwargs.pop("w", _w())
    y = calls(rig.dispatcher).conv2d(x, w, **kwargs)
    assert rig.family.launches == [] and rig.dispatcher.stats().fallbacks == 1
    assert torch.equal(y, F.conv2d(x, w, **kwargs))
    assert why in caplog.text
    with pytest.raises(UnsupportedProblem, match=why):
        calls(make_rig(Policy.CACHED, strict=True).dispatcher).conv2d(x, w, **kwargs)


def test_errors_are_raised_as_f_conv2d_raises() -> None:
    d = calls(make_rig(Policy.CACHED).dispatcher)
    with pytest.raises(RuntimeError):
        d.conv2d(_x(c=32), _w(c=16))  # channel mismatch
    with pytest.raises(RuntimeError, match="residual has shape"):
        d.conv2d(_x(), _w(), residual=torch.randn(2, 48, 5, 6).to(BF))
    with pytest.raises(ValueError, match="padding"):
        d.conv2d(_x(), _w(), padding="full")
    with pytest.raises(ValueError, match="activation"):
        d.conv2d(_x(), _w(), activation="tanh")
    with pytest.raises(TypeError):
        d.conv2d("x", _w())


def test_arguments_torch_rejects_are_rejected_after_a_valid_call_too() -> None:
    """Float or bool strides, paddings and groups equal to valid ints hash like them: they must not
    share the memoised entry of the int call (torch rejects them; so do we, memo or not)."""
    x, w = _x(), _w()
    d = calls(make_rig(Policy.CACHED).dispatcher)
    d.conv2d(x, w, None, (1, 1), (0, 0), (1, 1), 1)
    for kw in (dict(stride=(1.0, 1.0)), dict(padding=(0.0, 0.0)), dict(stride=(True, True)), dict(groups=1.0)):
        with pytest.raises((TypeError, RuntimeError)):
            F.conv2d(x.float(), w.float(), **kw)
        with pytest.raises((TypeError, RuntimeError)):
            d.conv2d(x, w, **kw)


def test_padding_same_and_tuples_are_pointwise_too() -> None:
    rig = make_rig(Policy.CACHED)
    x, w = _x(), _w()
    for kw in (dict(padding="same"), dict(padding="valid"), dict(stride=(1, 1), padding=(0, 0), dilation=[2, 2])):
        y = calls(rig.dispatcher).conv2d(x, w, **kw)
        assert compare(y, _ref(x, w), 1e-2, "bf16")[0]
    assert rig.dispatcher.stats().fallbacks == 0


def test_a_second_process_finds_the_tuned_conv_without_tuning(tmp_path: Path) -> None:
    """Tuned once into a real SQLite database, the conv problem is a hit for a new dispatcher."""
    db = tmp_path / "tuning.sqlite"

    def make(policy: Policy, tuner: FakeTuner, fam: FakeFamily) -> Dispatcher:
        real = _real_layers()

        def tune(problem, family, sink, hard_key, device_index, s, **kw):  # noqa: ANN001, ANN003, ANN202
            best = tuner(problem, family, sink, hard_key, device_index, s, **kw)
            sink.record_best(problem, hard_key, family.name, best, median_ms=0.01, tflops=100.0)
            return best

        layers = Layers(get_family=lambda n: fam, families_for=lambda p: [fam], open_store=real.open_store, tune=tune)
        s = dataclasses.replace(settings(tmp_path, policy=policy), db_url=str(db))
        return Dispatcher(s, layers=layers, device_info=lambda i: device_info(), on_gpu=lambda t: True)

    t1, f1 = FakeTuner({"tile": 256}), FakeFamily()
    calls(make(Policy.TUNE, t1, f1)).conv2d(_x(n=3), _w())
    assert len(t1.calls) == 1 and isinstance(t1.calls[0], ConvProblem)
    t2, f2 = FakeTuner(), FakeFamily()
    calls(make(Policy.TUNE, t2, f2)).conv2d(_x(n=4), _w())  # same bucket (N 3 and 4 -> 4)
    assert t2.calls == [] and f2.launches[0].config.tile == 256



def test_lowering_adapter_presents_the_gemm_operands_and_follows_new_weight_storage() -> None:
    """The adapter's strided views are the NHWC GEMM operands; a weight whose storage is replaced
    (param.data = ...) is seen by the next call, the same weight reuses its view."""
    p = ConvProblem("fprop", n=2, h=3, w=5, c=16, k=24, r=1, s=1, epilogue=Epilogue(with_c=True))
    lowering = p.gemm_lowering()
    assert lowering is not None
    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    run = lowering.runner(lambda a, b, d, *, c=None, bias=None, alpha=1.0, beta=0.0: seen.append((a, b, d, c)))
    x = torch.randn(2, 16, 3, 5).contiguous(memory_format=CL)
    w = torch.randn(24, 16, 1, 1).contiguous(memory_format=CL)
    y = torch.empty(2, 24, 3, 5).contiguous(memory_format=CL)
    r = torch.randn(2, 24, 3, 5).contiguous(memory_format=CL)
    run(x, w, y, residual=r, beta=1.0)
    a, b, d, c = seen[-1]
    assert torch.equal(a, x.permute(0, 2, 3, 1).reshape(30, 16)) and torch.equal(b, w.view(24, 16).t())
    assert d.data_ptr() == y.data_ptr() and d.stride() == (24, 1) and torch.equal(c, r.permute(0, 2, 3, 1).reshape(30, 24))
    run(x, w, y)
    assert seen[-1][1] is b  # the same weight: its view is reused
    w.data = torch.randn(24, 16, 1, 1).contiguous(memory_format=CL)
    run(x, w, y)
    assert seen[-1][1] is not b and torch.equal(seen[-1][1], w.view(24, 16).t())


def test_size_one_dims_reach_the_kernel_with_dense_strides(monkeypatch: pytest.MonkeyPatch) -> None:
    """A channels_last-contiguous tensor whose size-1 dimensions carry other strides (an (N, C, 1,
    1) tensor made NCHW-contiguous: H and W strides of 1 element) reaches the compiled conv
    function with the strides a dense channels_last tensor has (the kernels' TMA descriptors take
    every stride as a multiple of 16 bytes), as the same elements; dense tensors as they are."""
    from autocutlass.kernels.hopper_conv import runner as rmod
    from autocutlass.kernels.hopper_conv.config import HopperConvConfig

    got: list[torch.Tensor] = []
    monkeypatch.setattr(rmod, "get_compiled", lambda *a: lambda xv, wv, *rest: got.extend((xv, wv)))
    monkeypatch.setattr(rmod, "max_active_clusters", lambda dev, size: 1)
    problem = ConvProblem(ConvDirection.FPROP, n=2, h=1, w=1, c=32, k=48, r=3, s=3, pad_h=1, pad_w=1)
    run = rmod.HopperConvRunner(HopperConvConfig(tile_m=128, tile_n=128, tile_k=64), problem, None)
    x = torch.randn(2, 32, 1, 1).to(BF)  # NCHW-contiguous: strides (32, 1, 1, 1)
    assert x.is_contiguous(memory_format=CL) and x.stride() == (32, 1, 1, 1)
    w = torch.randn(48, 32, 1, 1).to(BF)  # a 1x1 filter, likewise
    y = torch.empty(2, 48, 1, 1).to(BF).contiguous(memory_format=CL)
    pointwise = dataclasses.replace(problem, r=1, s=1, pad_h=0, pad_w=0, stride_h=2, stride_w=2)
    run2 = rmod.HopperConvRunner(HopperConvConfig(tile_m=128, tile_n=128, tile_k=64), pointwise, None)
    run2(x, w, y)
    assert got[0].stride() == (32, 32, 32, 1) and torch.equal(got[0], x.permute(0, 2, 3, 1))
    assert got[1].stride() == (32, 32, 32, 1) and torch.equal(got[1], w.permute(0, 2, 3, 1))
    got.clear()
    xd = torch.randn(2, 32, 3, 3).to(BF).contiguous(memory_format=CL)
    wd = _w(r=3, s=3)
    run(xd, wd, torch.empty(2, 48, 3, 3).to(BF).contiguous(memory_format=CL))
    assert got[0].data_ptr() == xd.data_ptr() and got[0].stride() == xd.permute(0, 2, 3, 1).stride()
    assert got[1].stride() == wd.permute(0, 2, 3, 1).stride()
