"""A convolution whose input channels are not whole 16-byte units (a ResNet stem's 3 channels) as
a convolution with a one-column filter over a row-unfolded input, in pure Python (no torch at
import; the tensor transforms import it when called).

Hopper's im2col TMA loads whole 16-byte pixel rows, so a layer with C = 3 bf16 channels (6-byte
rows) cannot be read by it, and cuDNN runs such layers slowly (ResNet-50's 7x7 stride-2 stem on an
H100: 33 TFLOP/s forward, 49 wgrad; ``../shared/bench/anchors-conv-*``). In channels_last memory
the S taps of one filter row read S pixels of one input row, and T filter rows read T input rows,
so with ``rows`` = T,

    x'[n, h', q, (t*S + s)*C + c] = x[n, h'*g - pad_h' + t*dil_h, q*stride_w + s*dil_w - pad_w, c]
                                                                        (0 outside the image)
    w'[k, r', 0, (t*S + s)*C + c] = w[k, r'*T + t, s, c]                 (0 for r'*T + t >= R)

turn the layer into one with C' = T*S*C channels rounded up to whole 16-byte units, R' = ceil(R/T)
filter rows at T times the dilation, stride (stride_h, 1), one filter column: its output is the
layer's, pixel for pixel. T = 1 keeps the layer's rows, padding and dilation along H (x' has H
rows, padding pad_h); T > 1 materializes the rows the lowered layer reads, padding rows included,
and only those: the lowered layer reads x' rows p*stride_h + j*T*dil_h, all multiples of
g = gcd(stride_h, T*dil_h) (``row_step``), so x' keeps every g-th of them (x' row i holds input rows
i*g - pad_h + t*dil_h) and the lowered layer runs at stride stride_h/g and dilation T*dil_h/g over
(P-1)*stride_h/g + 1 + (T*dil_h/g)*(R'-1) rows, no padding. For the stride-2 stem with T = 2, g = 2:
x' is as many bytes as with T = 1, and the lowered layer a stride-1 4x1 convolution over 48 channels.
The implicit GEMM loads one
im2col row of C' channels per output pixel and filter row, and those loads bound it when they are
narrow: on an H100 the stem's lowered convolution alone took 130 us at batch 32 with T = 1 (7 loads
of 48 bytes per pixel) and 60 with T = 2 (4 of 96; ``benchmarks/probes/conv_unfold_rows_probe.py``,
2026-11-27), for an x' of 38.5 or 79 MB (that build kept every row). ``unfold_rows`` lists the T a layer's space offers.

The weight gradient of the lowered layer holds the layer's (``fold_weight_grad``). Served: fprop
(any epilogue the forward kernel serves) and wgrad; dgrad is not (the input gradient would need the
unfolded gradient summed back over the overlapping windows, and a stem's input needs no gradient in
training).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from autocutlass.ops.conv.problem import ConvDirection, ConvProblem

if TYPE_CHECKING:
    import torch

TMA_ALIGN_BYTES = 16
MAX_UNFOLDED_CHANNELS = 256
"""The most channels the unfolded input may have with one filter row per pixel (S*C rounded up):
beyond that x' would cost many times the layer's input in bytes, and such a layer's channels are
better padded once."""
ONE_BLOCK_CHANNELS = 64
"""Several filter rows per unfolded pixel (T > 1) are offered while C' stays within one K block of
the forward kernel's narrowest tile_k (64 channels): one im2col load per output pixel and filter row."""


WIDE_CHANNELS = 64
"""The other channel multiple C' may be rounded up to (``unfolded_channels``): one 128-byte swizzle
row of 16-bit channels, the box of the wgrad kernel's tiles across the taps
(``HopperConvWgradConfig.tap_channels``). With it the lowered layer's weight gradient is one
(K, R'*C') matrix that a single tile column covers (the stem at T = 2: 4 taps x 64 channels in one
256-wide tile), where 16-byte rounding leaves one tile per tap (48 of 64 columns used), each reading
all of dy again."""


def unfolded_channels(problem: ConvProblem, rows: int = 1, multiple: int = 0) -> int:
    """C' = T*S*C rounded up to whole 16-byte units of the input dtype, or (``multiple``, a multiple
    of those units, e.g. ``WIDE_CHANNELS``) to a multiple of that many channels."""
    unit = TMA_ALIGN_BYTES // problem.x_dtype.bytes
    if multiple:
        unit = -(-multiple // unit) * unit
    return -(-(rows * problem.s * problem.c) // unit) * unit


def unfold_rows(problem: ConvProblem) -> tuple[int, ...]:
    """The T a layer's space offers: 1, and every T > 1 whose C' fits one K block
    (``ONE_BLOCK_CHANNELS``) and that gives fewer filter rows R' than a smaller T."""
    out = [1]
    for t in range(2, problem.r + 1):
        if unfolded_channels(problem, t) > ONE_BLOCK_CHANNELS:
            break
        if -(-problem.r // t) < -(-problem.r // out[-1]):
            out.append(t)
    return tuple(out)


def unsupported(problem: Any, direction: ConvDirection) -> str | None:
    """Why ``problem`` is not a ``direction`` convolution this lowering serves, or None."""
    if getattr(problem, "op", None) != "conv2d":
        return f"op {getattr(problem, 'op', None)!r} is not conv2d"
    if problem.direction is not direction:
        return f"serves conv2d {direction.value} only, not {problem.direction.value}"
    if problem.groups != 1:
        return f"groups={problem.groups}: the unfolded convolution serves dense convolutions (groups = 1) only"
    if (problem.c * problem.x_dtype.bytes) % TMA_ALIGN_BYTES == 0:
        return (f"C={problem.c}: the input channels are whole {TMA_ALIGN_BYTES}-byte units, so the im2col TMA reads the "
                "layer as it is (no unfolding)")  # fmt: skip
    cp = unfolded_channels(problem)
    if cp > MAX_UNFOLDED_CHANNELS:
        return (f"S*C = {problem.s}*{problem.c} unfolds to {cp} channels, more than {MAX_UNFOLDED_CHANNELS}: pad the "
                "layer's channels to a multiple of 8 (16-bit) instead")  # fmt: skip
    if problem.q < 1 or problem.p < 1:
        return f"the output is empty (P={problem.p}, Q={problem.q})"
    from autocutlass.kernels.hopper_conv_unfold.unfold import STAGING_BYTES, RowUnfold, columns_per_cta

    if not columns_per_cta(RowUnfold(problem.c, problem.s, cp, problem.stride_w, problem.pad_w, problem.dil_w)):
        return (f"the filter row reaches {(problem.s - 1) * problem.dil_w + 1} input pixels of {problem.c} channels: "
                f"more than the unfolding kernel stages ({STAGING_BYTES} bytes)")  # fmt: skip
    return None


def row_step(problem: Any, rows: int) -> int:
    """g: x' keeps every g-th row of the rows T > 1 would read (1 for T = 1; see the module docstring)."""
    return 1 if rows == 1 else math.gcd(problem.stride_h, rows * problem.dil_h)


def unfolded_height(problem: ConvProblem, rows: int) -> int:
    """x''s rows: H for T = 1, else the rows the lowered layer reads, padding rows included."""
    if rows == 1:
        return problem.h
    return lowered_rows(problem.p, problem.r, problem.stride_h, problem.dil_h, rows)


def lowered_rows(p: int, r: int, stride_h: int, dil_h: int, rows: int) -> int:
    """x''s rows for T = ``rows`` > 1 and P output rows: (P-1)*stride_h/g + 1 + (T*dil_h/g)*(R'-1)."""
    g = math.gcd(stride_h, rows * dil_h)
    return (p - 1) * (stride_h // g) + 1 + (rows * dil_h // g) * (-(-r // rows) - 1)


def unfolded_problem(problem: ConvProblem, rows: int = 1, multiple: int = 0) -> ConvProblem:
    """The lowered layer for T = ``rows``: x' (N, C', H', Q), w' (K, C', R', 1), the same output; x'
    and w' are new tensors (16-byte aligned rows), the output (or dy) the caller's. C' as
    ``unfolded_channels`` rounds it (``multiple``). Assumes ``unsupported`` is None."""
    unit = TMA_ALIGN_BYTES
    common = dict(w=problem.q, c=unfolded_channels(problem, rows, multiple), s=1, stride_w=1, pad_w=0, dil_w=1,
                  align_x=unit, align_w=unit)  # fmt: skip
    if rows == 1:
        return dataclasses.replace(problem, **common)  # type: ignore[arg-type]
    g = row_step(problem, rows)
    return dataclasses.replace(
        problem, h=unfolded_height(problem, rows), r=-(-problem.r // rows), pad_h=0, stride_h=problem.stride_h // g,
        dil_h=rows * problem.dil_h // g, **common,
    )  # type: ignore[arg-type]  # fmt: skip


def unfold_input(x: torch.Tensor, s: int, stride_w: int, pad_w: int, dil_w: int, channels: int, *, rows: int = 1,
                 height: int = 0, pad_h: int = 0, dil_h: int = 1, step: int = 1) -> torch.Tensor:  # fmt: skip
    """x' (N, C', H', Q), channels_last, of ``x`` (N, C, H, W), channels_last: each output column's
    S input pixels side by side (``rows`` of them, input rows h'*step - pad_h + t*dil_h, for T > 1:
    then ``height`` = H' and ``step`` = g), zeros past the image and past T*S*C channels. The torch-ops reference of the
    unfolding kernel (``unfold``)."""
    import torch
    import torch.nn.functional as F

    n, c, h, w = x.shape
    xr = x.permute(0, 2, 3, 1)
    if not xr.is_contiguous():
        xr = xr.contiguous()
    if pad_w:
        xr = F.pad(xr, (0, 0, pad_w, pad_w))
    wp = w + 2 * pad_w
    q = (wp - dil_w * (s - 1) - 1) // stride_w + 1
    used = s * c
    one = xr.as_strided((n, h, q, s, c), (h * wp * c, wp * c, stride_w * c, dil_w * c, 1)).reshape(n, h, q, used)
    if rows == 1:
        out = torch.zeros((n, h, q, channels), dtype=x.dtype, device=x.device)
        out[..., :used] = one
        return out.permute(0, 3, 1, 2)
    out = torch.zeros((n, height, q, channels), dtype=x.dtype, device=x.device)
    for t in range(rows):
        src = torch.arange(height, device=x.device) * step - pad_h + t * dil_h  # input row of each x' row
        inside = (src >= 0) & (src < h)
        if bool(inside.any()):
            out[:, inside, :, t * used:(t + 1) * used] = one[:, src[inside]]
    return out.permute(0, 3, 1, 2)


def unfold_weight(w: torch.Tensor, channels: int, rows: int = 1) -> torch.Tensor:
    """w' (K, C', R', 1), channels_last, of ``w`` (K, C, R, S): T filter rows' S taps side by side."""
    import torch

    k, c, r, s = w.shape
    taps = -(-r // rows)
    wr = w.permute(0, 2, 3, 1).reshape(k, r, s * c)
    if taps * rows > r:
        wr = torch.cat([wr, wr.new_zeros(k, taps * rows - r, s * c)], dim=1)
    out = torch.zeros((k, taps, 1, channels), dtype=w.dtype, device=w.device)
    out[:, :, 0, : rows * s * c] = wr.reshape(k, taps, rows * s * c)
    return out.permute(0, 3, 1, 2)


def fold_weight_grad(dwp: torch.Tensor, dw: torch.Tensor, rows: int = 1) -> None:
    """Write the layer's weight gradient ``dw`` (K, C, R, S), channels_last-contiguous, from the
    lowered layer's ``dwp`` (K, C', R', 1), channels_last: filter row r is row r // T's channels
    (r % T)*S*C onwards."""
    k, c, r, s = dw.shape
    rows_view = dw.permute(0, 2, 3, 1)
    if not rows_view.is_contiguous():
        raise ValueError(f"dw must be a channels_last-contiguous (K, C, R, S) tensor, got shape {tuple(dw.shape)} "
                         f"with strides {dw.stride()}")  # fmt: skip
    taps = dwp.shape[2]
    src = dwp.permute(0, 2, 3, 1)[:, :, 0, : rows * s * c].reshape(k, taps * rows, s * c)[:, :r]
    rows_view.view(k, r, s * c).copy_(src)
