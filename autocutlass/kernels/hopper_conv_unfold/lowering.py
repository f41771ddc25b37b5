"""A convolution whose input channels are not whole 16-byte units (a ResNet stem's 3 channels) as
a convolution with a one-column filter over a row-unfolded input, in pure Python (no torch at
import; the tensor transforms import it when called).

Hopper's im2col TMA loads whole 16-byte pixel rows, so a layer with C = 3 bf16 channels (6-byte
rows) cannot be read by it, and cuDNN runs such layers slowly (ResNet-50's 7x7 stride-2 stem on an
H100: 33 TFLOP/s forward, 49 wgrad; ``../shared/bench/anchors-conv-*``). In channels_last memory
the S taps of one filter row read S pixels of one input row, so

    x'[n, h, q, s*C + c] = x[n, h, q*stride_w + s*dil_w - pad_w, c]    (0 outside the row)
    w'[k, r, 0, s*C + c] = w[k, r, s, c]                              (0 for s*C + c >= S*C)

turn the layer into one with C' = S*C rounded up to whole 16-byte units, an R x 1 filter, stride
(stride_h, 1), padding (pad_h, 0) and dilation (dil_h, 1) over an input of width Q (the output's):
its output is the layer's, pixel for pixel. x' costs one pass over the input (about S/stride_w
times its bytes, written); the implicit GEMM then reads whole rows. The weight gradient of the
lowered layer holds the layer's in its first S*C channels (``fold_weight_grad``).

Served: fprop (any epilogue the forward kernel serves) and wgrad; dgrad is not (the input gradient
would need the unfolded gradient summed back over the overlapping windows, and a stem's input
needs no gradient in training).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from autocutlass.ops.conv.problem import ConvDirection, ConvProblem

if TYPE_CHECKING:
    import torch

TMA_ALIGN_BYTES = 16
MAX_UNFOLDED_CHANNELS = 256
"""The most channels the unfolded input may have (S*C rounded up): beyond that x' would cost
many times the layer's input in bytes, and such a layer's channels are better padded once."""
DIRECTIONS = (ConvDirection.FPROP, ConvDirection.WGRAD)


def unfolded_channels(problem: ConvProblem) -> int:
    """C' = S*C rounded up to whole 16-byte units of the input dtype."""
    unit = TMA_ALIGN_BYTES // problem.x_dtype.bytes
    return -(-(problem.s * problem.c) // unit) * unit


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
    return None


def unfolded_problem(problem: ConvProblem) -> ConvProblem:
    """The lowered layer: x' (N, C', H, Q), w' (K, C', R, 1), the same output; x' and w' are new
    tensors (16-byte aligned rows), the output (or dy) the caller's. Assumes ``unsupported`` is None."""
    unit = TMA_ALIGN_BYTES
    out = dataclasses.replace(
        problem, w=problem.q, c=unfolded_channels(problem), s=1, stride_w=1, pad_w=0, dil_w=1,
        align_x=unit, align_w=unit,
    )  # fmt: skip
    return out


def unfold_input(x: torch.Tensor, s: int, stride_w: int, pad_w: int, dil_w: int, channels: int) -> torch.Tensor:
    """x' (N, C', H, Q), channels_last, of ``x`` (N, C, H, W), channels_last: each output column's
    S input pixels side by side, zeros past the row's ends and past S*C channels."""
    import torch
    import torch.nn.functional as F

    n, c, h, w = x.shape
    rows = x.permute(0, 2, 3, 1)
    if not rows.is_contiguous():
        rows = rows.contiguous()
    if pad_w:
        rows = F.pad(rows, (0, 0, pad_w, pad_w))
    wp = w + 2 * pad_w
    q = (wp - dil_w * (s - 1) - 1) // stride_w + 1
    used = s * c
    out = torch.empty((n, h, q, channels), dtype=x.dtype, device=x.device)
    if channels > used:
        out[..., used:].zero_()
    src = rows.as_strided((n, h, q, s, c), (h * wp * c, wp * c, stride_w * c, dil_w * c, 1))
    out[..., :used].view(n, h, q, s, c).copy_(src)
    return out.permute(0, 3, 1, 2)


def unfold_weight(w: torch.Tensor, channels: int) -> torch.Tensor:
    """w' (K, C', R, 1), channels_last, of ``w`` (K, C, R, S): a filter row's S taps side by side."""
    import torch

    k, c, r, s = w.shape
    out = torch.zeros((k, r, 1, channels), dtype=w.dtype, device=w.device)
    out[:, :, 0, : s * c].view(k, r, s, c).copy_(w.permute(0, 2, 3, 1))
    return out.permute(0, 3, 1, 2)


def fold_weight_grad(dwp: torch.Tensor, dw: torch.Tensor) -> None:
    """Write the layer's weight gradient ``dw`` (K, C, R, S), channels_last-contiguous, from the
    lowered layer's ``dwp`` (K, C', R, 1), channels_last: its first S*C channels."""
    k, c, r, s = dw.shape
    rows = dw.permute(0, 2, 3, 1)
    if not rows.is_contiguous():
        raise ValueError(f"dw must be a channels_last-contiguous (K, C, R, S) tensor, got shape {tuple(dw.shape)} "
                         f"with strides {dw.stride()}")  # fmt: skip
    rows.view(k, r, s * c).copy_(dwp.permute(0, 2, 3, 1)[:, :, 0, : s * c])
