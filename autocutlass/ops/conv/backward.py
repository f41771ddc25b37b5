"""The conv2d backward front-ends: dgrad (dx from dy and w) and wgrad (dw from dy and x).

What ``torch.ops.autocutlass.conv2d_dgrad`` and ``conv2d_wgrad`` (the backward of
``autocutlass.conv2d``) call through the dispatcher. Each call is fingerprinted as a
``ConvProblem`` of its own direction, with the forward convolution's fields (x, w, y shapes,
geometry, dtypes), so a layer's dgrad and wgrad are looked up, tuned and recorded apart from its
fprop and from each other.

* ``conv2d_dgrad(dy, weight, input_size, stride, padding, dilation, groups)`` -> dx of shape
  ``input_size``; ``conv2d_wgrad(dy, x, weight_size, ...)`` -> dw of shape ``weight_size``.
  Padding is explicit and symmetric (the autograd formula pads the input itself for a 'same'
  padding that pads unevenly). 4-D tensors only (the formula adds the batch of an unbatched call).
* **Errors**: tensors on different devices, dtypes that differ, a dy whose shape is not the
  output of the forward convolution these arguments describe (``RuntimeError``, as
  ``aten.convolution_backward`` raises for them).
* ``Unsupported(reason)``, run by ``aten.convolution_backward`` (cuDNN) with that output mask,
  logged once per reason: CPU tensors, GPUs other than sm_90, dtypes other than bf16/fp16 and
  float32 through TF32 (when ``torch.backends.cudnn.allow_tf32``), an input that autograd
  records (these ops are differentiable through ``torch_ops``, never by the kernels), tensors
  that are not channels_last-contiguous, empty tensors. Which geometries a kernel serves is the
  families' call (``kernels.families_for``); a problem no family serves runs torch with each
  family's reason, which names the layer (one log line per fingerprint).
* Output: a new channels_last tensor (dx like x, dw like the channels_last weight), in dy's
  dtype; the torch fallback's output is returned in the layout ``grad_output_format`` says, so
  both paths give the same strides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from autocutlass.ops.base import Entry, PlanContext, Unsupported
from autocutlass.ops.conv.frontend import (
    _DTYPES,
    _OUT_DTYPES,
    ConvPlan,
    _cudnn_benchmark,
    cudnn_vendor_variant,
    suggests_channels_last,
)
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.frontend import SERVED_CC, pow2_align
from autocutlass.ops.launch import on_device

_CL = torch.channels_last

__all__ = ["CONV2D_DGRAD", "CONV2D_WGRAD", "ConvGradCall", "ConvGradFrontEnd", "grad_output_format", "torch_grad"]


def grad_output_format(dy: torch.Tensor, other: torch.Tensor) -> torch.memory_format:
    """The layout of a dgrad's dx or a wgrad's dw: channels_last when dy or the other operand is
    (as the forward's ``conv2d_output_format``), else contiguous."""
    return _CL if suggests_channels_last(dy) or suggests_channels_last(other) else torch.contiguous_format


@dataclass(frozen=True)
class ConvGradCall:
    """One backward call: dy, the other operand (the weight for dgrad, x for wgrad), the shape of
    the computed tensor (x's for dgrad, the weight's for wgrad) and the forward's geometry."""

    direction: ConvDirection
    dy: torch.Tensor
    other: torch.Tensor
    size: tuple[int, int, int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int

    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(x's shape, the weight's shape) of the forward convolution."""
        if self.direction is ConvDirection.DGRAD:
            return self.size, tuple(self.other.shape)
        return tuple(self.other.shape), self.size


def _pair(v: Any, name: str, op: str) -> tuple[int, int]:
    t = tuple(int(i) for i in v)
    if len(t) != 2:
        raise RuntimeError(f"autocutlass.{op}: {name} must have two elements, got {list(v)!r}")
    return (t[0], t[1])


def expected_grad(call: ConvGradCall, op: str) -> torch.Size:
    """The shape of the computed tensor; raises for calls ``aten.convolution_backward`` rejects."""
    for name, t in (("grad_output", call.dy), ("weight" if call.direction is ConvDirection.DGRAD else "input", call.other)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"autocutlass.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise RuntimeError(f"autocutlass.{op}: {name} must be 4-D (N, C, H, W), got shape {tuple(t.shape)}")
    if len(call.size) != 4:
        raise RuntimeError(f"autocutlass.{op}: the computed tensor's size must have 4 elements, got {list(call.size)}")
    if call.dy.device != call.other.device:
        raise RuntimeError(f"autocutlass.{op}: expected all tensors on one device, got {call.dy.device} and "
                           f"{call.other.device}")  # fmt: skip
    if call.dy.dtype != call.other.dtype:
        raise RuntimeError(f"autocutlass.{op}: grad_output has dtype {call.dy.dtype}, the other operand "
                           f"{call.other.dtype}")  # fmt: skip
    x_shape, w_shape = call.shapes()
    xm = torch.empty(x_shape, dtype=call.dy.dtype, device="meta")
    wm = torch.empty(w_shape, dtype=call.dy.dtype, device="meta")
    y = F.conv2d(xm, wm, None, call.stride, call.padding, call.dilation, call.groups)
    if tuple(y.shape) != tuple(call.dy.shape):
        raise RuntimeError(f"autocutlass.{op}: grad_output has shape {tuple(call.dy.shape)}, but the convolution of "
                           f"an input {tuple(x_shape)} with a weight {tuple(w_shape)} (stride {call.stride}, padding "
                           f"{call.padding}, dilation {call.dilation}, groups {call.groups}) gives {tuple(y.shape)}")  # fmt: skip
    return torch.Size(call.size)


def torch_grad(call: ConvGradCall) -> torch.Tensor:
    """The call computed by torch (``aten.convolution_backward`` with one output of its mask), in
    the layout ``grad_output_format`` gives."""
    dgrad = call.direction is ConvDirection.DGRAD
    fmt = grad_output_format(call.dy, call.other)
    # The operand not read (x for dgrad, w for wgrad): an uninitialised tensor of its shape in the
    # result's layout (no memory traffic). torch.nn.grad's stride-0 stand-in (``expand``) makes
    # convolution_backward pick the contiguous layout, then copy the result (measured on CPU: one
    # clone per call that torch's own conv backward does not make).
    stand_in = torch.empty(call.size, dtype=call.dy.dtype, device=call.dy.device, memory_format=fmt)
    x, w = (stand_in, call.other) if dgrad else (call.other, stand_in)
    mask = [dgrad, not dgrad, False]
    grads = torch.ops.aten.convolution_backward(call.dy, x, w, None, list(call.stride), list(call.padding),
                                                list(call.dilation), False, [0, 0], call.groups, mask)  # fmt: skip
    out = grads[0] if dgrad else grads[1]
    return out if out.is_contiguous(memory_format=fmt) else out.contiguous(memory_format=fmt)


def plan(call: ConvGradCall, ctx: PlanContext, op: str) -> ConvPlan | Unsupported:
    """Validate ``call`` (raising as torch would) and decide how the kernel layer serves it."""
    expected_grad(call, op)
    dy, other = call.dy, call.other
    if not ctx.on_gpu(dy):
        return Unsupported(f"tensors on {dy.device} (autocutlass serves CUDA tensors)")
    dev = dy.get_device()
    info = ctx.device_info(dev)
    if (info.cc_major, info.cc_minor) != SERVED_CC:
        return Unsupported(f"GPU {info.gpu_name} (cc {info.cc}) is not served; autocutlass kernels need cc 9.0")
    if dy.dtype not in _DTYPES:
        return Unsupported(f"dtype {dy.dtype} is not served (bfloat16, float16, float32 via TF32)")
    if dy.dtype is torch.float32 and not torch.backends.cudnn.allow_tf32:
        return Unsupported("float32 needs TF32, which torch.backends.cudnn.allow_tf32 forbids now")
    if torch.is_grad_enabled() and (dy.requires_grad or other.requires_grad):
        return Unsupported("an input requires grad; the kernels are not differentiable (torch.ops.autocutlass is)")
    if dy.numel() == 0 or other.numel() == 0 or 0 in call.size:
        return Unsupported("a tensor is empty")
    if not dy.is_contiguous(memory_format=_CL) or not other.is_contiguous(memory_format=_CL):
        return Unsupported("grad_output and the other operand must be channels_last-contiguous; NCHW runs cuDNN")
    (n, c, h, wd), (k, _, r, s) = call.shapes()
    elt = dy.element_size()
    dgrad = call.direction is ConvDirection.DGRAD
    align_y = min(pow2_align(dy.data_ptr()), pow2_align(k * elt))
    align_other = min(pow2_align(other.data_ptr()), pow2_align(c * elt))
    align_out = pow2_align(c * elt)  # a new channels_last tensor whose pixel rows (x) or filter rows (w) are C long
    problem = ConvProblem(
        direction=call.direction, n=n, h=h, w=wd, c=c, k=k, r=r, s=s,
        stride_h=call.stride[0], stride_w=call.stride[1], pad_h=call.padding[0], pad_w=call.padding[1],
        dil_h=call.dilation[0], dil_w=call.dilation[1], groups=call.groups,
        x_dtype=_DTYPES[dy.dtype], w_dtype=_DTYPES[dy.dtype], y_dtype=_OUT_DTYPES[dy.dtype],
        align_x=align_out if dgrad else align_other, align_w=align_other if dgrad else align_out, align_y=align_y,
    )  # fmt: skip
    return ConvPlan(problem, dev, call.size, dy.dtype)


class ConvGradFrontEnd:
    """``conv2d_dgrad(dy, weight, input_size, stride, padding, dilation, groups)`` or
    ``conv2d_wgrad(dy, x, weight_size, stride, padding, dilation, groups)``."""

    def __init__(self, direction: ConvDirection) -> None:
        self.direction = direction
        self.name = f"conv2d_{direction.value}"

    def memo_key(self, policy: Any, dy: Any, other: Any, size: Any, stride: Any, padding: Any, dilation: Any,
                 groups: Any) -> tuple[Any, ...]:  # fmt: skip
        return (
            self, policy,
            torch.is_grad_enabled() and (dy.requires_grad or other.requires_grad),
            dy.dtype is torch.float32 and torch.backends.cudnn.allow_tf32,
            dy.shape, dy.stride(), dy.dtype, dy.get_device(), dy.data_ptr() & 15,
            other.shape, other.stride(), other.dtype, other.get_device(), other.data_ptr() & 15,
            tuple(size), tuple(stride), tuple(padding), tuple(dilation), groups, _cudnn_benchmark(),
        )  # fmt: skip

    vendor_variant = staticmethod(cudnn_vendor_variant)

    def make_call(self, dy: Any, other: Any, size: Any, stride: Any, padding: Any, dilation: Any,
                  groups: Any) -> ConvGradCall:  # fmt: skip
        sz = tuple(int(i) for i in size)
        return ConvGradCall(self.direction, dy, other, sz, _pair(stride, "stride", self.name),  # type: ignore[arg-type]
                            _pair(padding, "padding", self.name), _pair(dilation, "dilation", self.name), int(groups))  # fmt: skip

    def reject(self, *args: Any) -> None:
        expected_grad(self.make_call(*args), self.name)

    def expected(self, call: ConvGradCall) -> None:
        expected_grad(call, self.name)

    def plan(self, call: ConvGradCall, ctx: PlanContext) -> ConvPlan | Unsupported:
        return plan(call, ctx, self.name)

    def torch_entry(self, call: ConvGradCall) -> Entry:
        direction = self.direction

        def run(dy: Any, other: Any, size: Any, stride: Any, padding: Any, dilation: Any, groups: Any) -> torch.Tensor:
            return torch_grad(ConvGradCall(direction, dy, other, tuple(size), tuple(stride), tuple(padding),  # type: ignore[arg-type]
                                           tuple(dilation), int(groups)))  # fmt: skip

        return run

    def kernel_entry(self, plan: ConvPlan, runner: Callable[..., None], call: ConvGradCall) -> Entry:
        shape, dtype, device = plan.out_shape, plan.out_dtype, call.dy.device

        def run(dy: Any, other: Any, _size: Any, _stride: Any, _padding: Any, _dilation: Any, _groups: Any
                ) -> torch.Tensor:  # fmt: skip
            out = torch.empty(shape, dtype=dtype, device=device, memory_format=_CL)
            runner(dy, other, out)
            return out

        return on_device(run, plan.device_index)


CONV2D_DGRAD = ConvGradFrontEnd(ConvDirection.DGRAD)
CONV2D_WGRAD = ConvGradFrontEnd(ConvDirection.WGRAD)
