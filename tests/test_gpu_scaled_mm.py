"""On an sm_90 GPU: ``autocutlass.scaled_mm`` (fp8 e4m3, per-tensor scales) against an fp32
reference and torch._scaled_mm, its fallback (calls outside the served recipe behave exactly as
torch._scaled_mm: its result or its error), a CUDA graph whose scales change between replays (the
kernel reads them on the device), and a hit path without host syncs. Skipped without CUDA.

``out_dtype`` defaults to None as in torch._scaled_mm (fp8 output, run by torch), so every call
meant for the kernel passes ``out_dtype`` explicitly."""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

import autocutlass

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

F8, BF = torch.float8_e4m3fn, torch.bfloat16
ACTS = {None: lambda y: y, "relu": F.relu, "gelu": F.gelu, "silu": F.silu,
        "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}  # fmt: skip


def f8(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda").to(F8)


def scale(v: float, shape: tuple[int, ...] = ()) -> torch.Tensor:
    return torch.full(shape, v, device="cuda", dtype=torch.float32)


def reference(a, b, sa, sb, bias=None, out_dtype=BF, act=None) -> torch.Tensor:  # noqa: ANN001
    r = (a.float() @ b.float()) * sa * sb
    if bias is not None:
        r = r + bias.float()
    return ACTS[act](r).to(out_dtype)


def close(x: torch.Tensor, ref: torch.Tensor) -> None:
    assert x.shape == ref.shape and x.dtype == ref.dtype
    torch.testing.assert_close(x.float(), ref.float(), atol=3e-2 * ref.float().abs().max().item() + 1e-2, rtol=2e-2)


def served(f, *args, **kwargs):  # noqa: ANN001, ANN201
    if f is autocutlass.scaled_mm and len(args) < 8:  # 8 positional: use_fast_accum is the 8th
        kwargs.setdefault("use_fast_accum", True)  # the kernel's accumulation; False runs torch
    before = autocutlass.stats().fallbacks
    r = f(*args, **kwargs)
    assert autocutlass.stats().fallbacks == before, "fell back to torch"
    return r


@pytest.mark.parametrize("out_dtype", [BF, torch.float16, torch.float32])
@pytest.mark.parametrize(("act", "with_bias"), [(None, False), ("silu", True), ("gelu_tanh", False), ("relu", True)])
def test_served_against_the_reference(out_dtype: torch.dtype, act: str | None, with_bias: bool) -> None:
    a, b = f8(1000, 1024), f8(768, 1024).t()
    sa, sb = scale(0.75), scale(0.375)
    bias = torch.randn(768, device="cuda").to(out_dtype) if with_bias else None
    y = served(autocutlass.scaled_mm, a, b, sa, sb, bias=bias, out_dtype=out_dtype, activation=act)
    close(y, reference(a, b, sa, sb, bias, out_dtype, act))
    if out_dtype is not torch.float32:
        close(y, ACTS[act](torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype, use_fast_accum=True).float()).to(out_dtype))


@pytest.mark.parametrize("m", [1, 16, 100])
@pytest.mark.parametrize("shape", [(), (1,)])
def test_decode_shapes_and_scale_shapes(m: int, shape: tuple[int, ...]) -> None:
    a, b, sa, sb = f8(m, 4096), f8(1024, 4096).t(), scale(0.5, shape), scale(2.0, shape)
    out = torch.full((m, 1024), float("nan"), device="cuda", dtype=BF)
    assert served(autocutlass.scaled_mm, a, b, sa, sb, out_dtype=BF, out=out) is out
    close(out, reference(a, b, sa, sb))


def test_unsupported_layout_runs_torch() -> None:
    a, w = f8(256, 512), f8(384, 512)
    before = autocutlass.stats().fallbacks
    try:  # torch._scaled_mm on CUDA rejects a row-major B itself: its error propagates
        y = autocutlass.scaled_mm(a, w.t().contiguous(), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=True)
    except RuntimeError:
        pass
    else:
        close(y, reference(a, w.t(), 1.0, 1.0))
    assert autocutlass.stats().fallbacks == before + 1


def test_cuda_graph_replays_read_the_current_scales() -> None:
    a, b, bias = f8(256, 1024), f8(512, 1024).t(), torch.randn(512, device="cuda").to(BF)
    sa, sb = scale(1.0), scale(1.0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # compile and memoise outside the capture
            served(autocutlass.scaled_mm, a, b, sa, sb, bias=bias, out_dtype=BF, activation="silu")
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = autocutlass.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=BF, activation="silu", use_fast_accum=True)
    for va, vb in ((0.5, 2.0), (0.25, 0.125), (3.0, 1.0)):
        sa.fill_(va)
        sb.fill_(vb)
        g.replay()
        torch.cuda.synchronize()
        close(y, reference(a, b, va, vb, bias, BF, "silu"))


def test_hit_path_never_syncs() -> None:
    a, b, sa, sb = f8(512, 256), f8(384, 256).t(), scale(0.5), scale(2.0)
    served(autocutlass.scaled_mm, a, b, sa, sb, out_dtype=BF)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            autocutlass.scaled_mm(a, b, sa, sb, out_dtype=BF, use_fast_accum=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_default_use_fast_accum_false_runs_torch() -> None:
    a, b, sa, sb = f8(256, 512), f8(384, 512).t(), scale(0.5), scale(2.0)
    before = autocutlass.stats().fallbacks
    y = autocutlass.scaled_mm(a, b, sa, sb, out_dtype=BF)  # use_fast_accum: torch's default False
    assert autocutlass.stats().fallbacks == before + 1
    assert torch.equal(y, torch._scaled_mm(a, b, sa, sb, out_dtype=BF))
    y = autocutlass.scaled_mm(a, b, sa, sb, None, None, BF)  # the same, positionally (torch's order)
    assert autocutlass.stats().fallbacks == before + 2
    assert torch.equal(y, torch._scaled_mm(a, b, sa, sb, None, None, BF))


def test_positional_arguments_in_torchs_order_are_served() -> None:
    a, b, sa, sb = f8(256, 512), f8(384, 512).t(), scale(0.5), scale(2.0)
    bias = torch.randn(384, device="cuda").to(torch.float16)
    y = served(autocutlass.scaled_mm, a, b, sa, sb, bias, None, torch.float16, True)
    close(y, reference(a, b, sa, sb, bias, torch.float16))


def _torch_served_cases() -> dict[str, tuple[tuple, dict]]:  # type: ignore[type-arg]
    a, b, sa, sb = f8(256, 512), f8(384, 512).t(), scale(0.5), scale(2.0)
    e5a, e5b = a.to(torch.float8_e5m2), b.to(torch.float8_e5m2)  # b stays column-major
    rw_a = torch.rand(256, 1, device="cuda") + 0.5
    rw_b = torch.rand(1, 384, device="cuda") + 0.5
    fast = {"use_fast_accum": True}
    return {
        "out_dtype_none": ((a, b, sa, sb), fast),  # torch's default: fp8 output
        "out_dtype_fp8": ((a, b, sa, sb), {"out_dtype": F8, **fast}),
        "scale_result": ((a, b, sa, sb), {"out_dtype": F8, "scale_result": scale(4.0), **fast}),
        "e4m3_x_e5m2": ((a, e5b, sa, sb), {"out_dtype": BF, **fast}),
        "e5m2_x_e4m3": ((e5a, b, sa, sb), {"out_dtype": BF, **fast}),
        "e5m2_x_e5m2": ((e5a, e5b, sa, sb), {"out_dtype": BF, **fast}),  # cuBLASLt rejects: torch's error
        "rowwise": ((a, b, rw_a, rw_b), {"out_dtype": BF, **fast}),
        "bias_fp32": ((a, b, sa, sb), {"out_dtype": BF, "bias": torch.randn(384, device="cuda"), **fast}),
        "bias_bf16_fp16_out": (
            (a, b, sa, sb), {"out_dtype": torch.float16, "bias": torch.randn(384, device="cuda").to(BF), **fast}
        ),
        "scale_fp64": ((a, b, sa.double(), sb), {"out_dtype": BF, **fast}),
    }  # fmt: skip


TORCH_SERVED = ["out_dtype_none", "out_dtype_fp8", "scale_result", "e4m3_x_e5m2", "e5m2_x_e4m3", "e5m2_x_e5m2",
                "rowwise", "bias_fp32", "bias_bf16_fp16_out", "scale_fp64"]  # fmt: skip


@pytest.mark.parametrize("name", TORCH_SERVED)
def test_calls_outside_the_served_recipe_behave_as_torch(name: str) -> None:
    """Each runs torch._scaled_mm (one fallback): torch's result, or torch's exception type."""
    cases = _torch_served_cases()
    assert sorted(cases) == sorted(TORCH_SERVED)
    args, kw = cases[name]
    before = autocutlass.stats().fallbacks
    try:
        expected = torch._scaled_mm(*args, **kw)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            autocutlass.scaled_mm(*args, **kw)
    else:
        y = autocutlass.scaled_mm(*args, **kw)
        assert y.dtype == expected.dtype, name
        assert torch.equal(y.float(), expected.float()), name
    assert autocutlass.stats().fallbacks == before + 1, name
