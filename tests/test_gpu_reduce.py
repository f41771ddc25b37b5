"""The split-K reduce kernel on the GPU: random fp32 workspaces, NaN-poisoned outputs with padded
row strides, against a float64 torch reference of

    D = act(alpha * (ws[0] + ... + ws[S-1]) + beta * C + bias)

for M in {1, 7, 257}, N in {8, 136, 4104}, L in {1, 3}, every activation, with and without C and
bias, the three D dtypes; plus bitwise determinism and one compile serving every shape."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from autocutlass.ops.gemm.problem import Activation, DType

pytestmark = pytest.mark.gpu

SHAPES = list(itertools.product((1, 7, 257), (8, 136, 4104), (1, 3)))  # (M, N, L)
ALPHA, BETA = 0.75, -0.5
TOL = {DType.BF16: 1.6e-2, DType.FP16: 2e-3, DType.FP32: 2e-5}
"""Absolute and relative tolerance per D dtype: a few units of D's rounding."""

# (splits, d_dtype, c_dtype, bias, activation): every activation with and without C and bias in
# bf16, then the other D dtypes, mixed C dtypes and the split-count extremes.
CLASSES: list[tuple[int, DType, DType | None, bool, Activation]] = [
    (4, DType.BF16, c, b, act)
    for act in Activation
    for c, b in ((None, False), (DType.BF16, False), (None, True), (DType.BF16, True))
] + [
    (2, DType.FP16, DType.FP32, True, Activation.GELU),
    (3, DType.FP16, DType.FP16, False, Activation.GELU_TANH),
    (5, DType.FP32, DType.FP32, True, Activation.SILU),
    (3, DType.FP32, DType.BF16, False, Activation.GELU_TANH),
    (16, DType.FP32, None, False, Activation.NONE),
    (1, DType.BF16, None, True, Activation.RELU),
]


def _torch_dtype(dt: DType) -> Any:
    import torch

    return {DType.BF16: torch.bfloat16, DType.FP16: torch.float16, DType.FP32: torch.float32}[dt]


def _rows(shape: tuple[int, ...], dtype: Any, pad: int, gen: Any | None) -> Any:
    """A (..., M, N) view of a NaN (..., M, N + pad) tensor (row stride N + pad), filled with
    random values when ``gen`` is given."""
    import torch

    full = torch.full((*shape[:-1], shape[-1] + pad), float("nan"), dtype=dtype, device="cuda")
    view = full[..., : shape[-1]]
    if gen is not None:
        view.copy_(torch.randn(shape, generator=gen, device="cuda").to(dtype))
    return view


def _make(cls: tuple[Any, ...], m: int, n: int, l: int, seed: int, ws_extra: int = 0) -> dict[str, Any]:
    """Inputs of one call: ws (S, L, M, n_pad), D (NaN), C, bias, with torch's argument order."""
    import torch

    splits, d_dt, c_dt, bias, _ = cls
    gen = torch.Generator(device="cuda").manual_seed(seed)
    n_pad = -(-n // 4) * 4 + ws_extra
    ws = torch.full((splits, l, m, n_pad), float("nan"), dtype=torch.float32, device="cuda")
    ws[..., :n] = torch.randn((splits, l, m, n), generator=gen, device="cuda")
    lead = (m, n) if l == 1 else (l, m, n)
    d_pad = 16 // DType(d_dt).bytes  # keeps D's rows 16-byte aligned, as the kernel requires
    d = _rows(lead, _torch_dtype(d_dt), d_pad, None)
    c = _rows(lead, _torch_dtype(c_dt), max(1, 4 // c_dt.bytes), gen) if c_dt is not None else None
    b = torch.randn(n, generator=gen, device="cuda").to(_torch_dtype(d_dt)) if bias else None
    return {"ws": ws, "d": d, "c": c, "bias": b}


def _reference(cls: tuple[Any, ...], io: dict[str, Any]) -> Any:
    import torch
    import torch.nn.functional as F

    act = cls[4]
    n = io["d"].shape[-1]
    acc = io["ws"][..., :n].double().sum(dim=0)  # (L, M, N)
    x = ALPHA * acc.reshape(io["d"].shape)
    if io["c"] is not None:
        x = x + BETA * io["c"].double()
    if io["bias"] is not None:
        x = x + io["bias"].double()
    if act is Activation.RELU:
        x = torch.relu(x)
    elif act is Activation.GELU:
        x = F.gelu(x)
    elif act is Activation.GELU_TANH:
        x = F.gelu(x, approximate="tanh")
    elif act is Activation.SILU:
        x = F.silu(x)
    return x


def _run(fn: Any, io: dict[str, Any]) -> None:
    fn(io["ws"], io["d"], io["c"], io["bias"], ALPHA, BETA)


def _get(cls: tuple[Any, ...], rank: int) -> Any:
    from autocutlass.kernels.hopper_gemm.reduce import get_reduce

    return get_reduce(*cls, rank, None)


def _ids(cls: tuple[Any, ...]) -> str:
    s, d, c, b, act = cls
    return f"S{s}-{d.value}-c{c.value if c else 'none'}-{'bias' if b else 'nobias'}-{act.value}"


@pytest.mark.parametrize("cls", CLASSES, ids=[_ids(c) for c in CLASSES])
def test_reduce_matches_reference(cls: tuple[Any, ...]) -> None:
    import torch

    for m, n, l in SHAPES:
        fn = _get(cls, 3 if l > 1 else 2)
        io = _make(cls, m, n, l, seed=m * 7 + n + l)
        _run(fn, io)
        torch.cuda.synchronize()
        d = io["d"]
        tol = TOL[cls[1]]
        where = f"M={m} N={n} L={l}"
        torch.testing.assert_close(d.double(), _reference(cls, io), atol=tol, rtol=tol,
                                   msg=lambda s, where=where: f"{where}: {s}")
        # Row padding (past N) stays NaN: nothing is written out of bounds.
        full = torch.as_strided(d, (*d.shape[:-1], d.stride(-2)), d.stride())
        assert torch.isnan(full[..., n:]).all(), f"{where}: write past N"


TRANSPOSED = [(4, DType.BF16, None, False, Activation.NONE), (8, DType.BF16, DType.BF16, True, Activation.SILU),
              (3, DType.FP32, DType.FP32, True, Activation.GELU), (5, DType.FP16, None, True, Activation.RELU)]


@pytest.mark.parametrize("cls", TRANSPOSED, ids=[_ids(c) for c in TRANSPOSED])
def test_transposed_reduce_writes_the_column_major_view(cls: tuple[Any, ...]) -> None:
    """The transposed class (``swap_ab``'s D' = D^T): the slabs are (S, L, M', N'_pad) row-major,
    D' and C' the transposed views of row-major (L, N', M') tensors with padded rows, bias along
    D''s rows. Every N' residue of the 4-column vectors (1, 7, 130, 257), NaN-poisoned D with its
    padding left untouched."""
    import torch

    from autocutlass.kernels.hopper_gemm.reduce import get_reduce

    splits, d_dt, c_dt, bias, act = cls
    for m, n, l in [(8, 1, 1), (136, 7, 3), (264, 130, 1), (64, 257, 2)]:  # (M', N', L): D is N' x M'
        gen = torch.Generator(device="cuda").manual_seed(m + n + l)
        n_pad = -(-n // 4) * 4
        ws = torch.full((splits, l, m, n_pad), float("nan"), dtype=torch.float32, device="cuda")
        ws[..., :n] = torch.randn((splits, l, m, n), generator=gen, device="cuda")
        lead = (n, m) if l == 1 else (l, n, m)  # row-major D (original orientation), rows padded
        d_row = _rows(lead, _torch_dtype(d_dt), 16 // d_dt.bytes, None)
        c_row = _rows(lead, _torch_dtype(c_dt), max(1, 4 // c_dt.bytes), gen) if c_dt is not None else None
        b = torch.randn(m, generator=gen, device="cuda").to(_torch_dtype(d_dt)) if bias else None
        io = {"ws": ws, "d": d_row.transpose(-1, -2), "c": None if c_row is None else c_row.transpose(-1, -2), "bias": b}
        fn = get_reduce(splits, d_dt, c_dt, bias, act, 3 if l > 1 else 2, None, transposed=True)
        _run(fn, io)
        torch.cuda.synchronize()
        want = ALPHA * ws[..., :n].double().sum(dim=0).reshape(io["d"].shape)
        if io["c"] is not None:
            want = want + BETA * io["c"].double()
        if b is not None:  # along D''s rows (D's columns)
            want = want + b.double()[:, None]
        want = {Activation.NONE: lambda x: x, Activation.RELU: torch.relu, Activation.SILU: torch.nn.functional.silu,
                Activation.GELU: torch.nn.functional.gelu}[act](want)  # fmt: skip
        tol = TOL[d_dt]
        torch.testing.assert_close(io["d"].double(), want, atol=tol, rtol=tol, msg=lambda s, m=m, n=n, l=l: f"M'={m} N'={n} L={l}: {s}")
        full = torch.as_strided(d_row, (*d_row.shape[:-1], d_row.stride(-2)), d_row.stride())
        assert torch.isnan(full[..., m:]).all(), f"M'={m} N'={n} L={l}: write past D's rows"


def test_reduce_is_bitwise_deterministic() -> None:
    import torch

    cls = (8, DType.BF16, DType.BF16, True, Activation.GELU)
    fn = _get(cls, 3)
    io = _make(cls, 257, 4104, 3, seed=1)
    outs = []
    for _ in range(3):
        io["d"].fill_(float("nan"))
        _run(fn, io)
        outs.append(io["d"].clone())
    torch.cuda.synchronize()
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    assert not torch.isnan(outs[0]).any()


def test_wider_workspace_rows_and_one_compile_for_every_shape() -> None:
    """ws rows longer than N (n_pad > N, poisoned past N) are read through their own stride; the
    class compiles once for all shapes."""
    import torch

    from autocutlass.kernels.hopper_gemm.reduce import STATS

    cls = (3, DType.FP32, None, True, Activation.NONE)
    fn = _get(cls, 2)
    before = STATS.compiled
    for m, n in ((1, 4), (33, 12), (300, 4100)):
        io = _make(cls, m, n, 1, seed=n, ws_extra=8)
        _run(_get(cls, 2), io)
        torch.cuda.synchronize()
        tol = TOL[cls[1]]
        torch.testing.assert_close(io["d"].double(), _reference(cls, io), atol=tol, rtol=tol)
    assert STATS.compiled == before
    assert fn is _get(cls, 2)


def test_misaligned_d_is_refused() -> None:
    """D rows that are not 16-byte aligned (N not a multiple of the vector) are refused by the
    argument checks rather than read or written out of bounds."""
    import torch

    cls = (2, DType.BF16, None, False, Activation.NONE)
    fn = _get(cls, 2)
    io = _make(cls, 4, 8, 1, seed=0)
    d_bad = torch.empty((4, 12), dtype=torch.bfloat16, device="cuda")  # 24-byte rows
    ws_bad = torch.zeros((2, 1, 4, 12), dtype=torch.float32, device="cuda")
    with pytest.raises(Exception):  # noqa: B017 - the TVM-FFI check's exception type is not ours
        fn(ws_bad, d_bad, None, None, 1.0, 0.0)
    with pytest.raises(Exception):  # noqa: B017 - M of ws and D disagree
        fn(io["ws"][:, :, :3], io["d"], None, None, 1.0, 0.0)
