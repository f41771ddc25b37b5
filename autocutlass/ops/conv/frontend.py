"""``autocutlass.conv2d``'s front-end: validation, planning and launch of one conv2d call.

Drop-in for ``F.conv2d(x, weight, bias, stride, padding, dilation, groups)`` plus two fused
extras: ``activation`` (as in ``linear``) and ``residual`` (a tensor of the output's shape added
before the activation: ResNet's add + ReLU).

Three outcomes, as for the GEMM ops:

1. **Errors** ``F.conv2d`` would raise (its own shape rules, applied to meta tensors: wrong
   ranks, channel mismatch, a filter larger than the padded input, bad padding strings),
   tensors on different devices, a residual of the wrong shape, dtype or device, an unknown
   activation.
2. ``Unsupported(reason)``: a valid call run by ``F.conv2d`` (then the residual and activation),
   logged once per reason (raised as ``UnsupportedProblem`` under ``AUTOCUTLASS_STRICT=1``). The
   front-end plans calls on a cc 9.0 GPU with channels_last x and weight; bf16, fp16, or fp32
   through TF32 when ``torch.backends.cudnn.allow_tf32`` allows it (PyTorch's default for
   convolutions); no autograd (the custom op records it: ``torch_ops``); a bias that is a contiguous, 16-byte aligned (K,) vector of x's
   dtype; a residual of the output's shape and dtype in channels_last; symmetric padding. Which
   geometries are served is the kernel families' call (``kernels.families_for``): the GEMM
   family serves pointwise convolutions (1x1, stride 1, no padding, one group: in NHWC exactly a
   GEMM, (N*H*W, C) x (C, K)); a problem no family serves runs ``F.conv2d`` with each family's
   reason.
3. A ``ConvPlan``: the ``ConvProblem`` (looked up, tuned and recorded as a conv2d problem) and the
   output to allocate, channels_last like ``F.conv2d``'s output for channels_last inputs.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from autocutlass.ops.base import Entry, PlanContext, Unsupported
from autocutlass.ops.conv.evaluation import HEURISTIC
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.frontend import (
    SERVED_CC,
    activate,
    parse_activation,
    pow2_align,
)
from autocutlass.ops.launch import meta, on_device
from autocutlass.ops.types import Activation, DType, Epilogue
from autocutlass.vendor import MAIN_VARIANT

_DTYPES = {torch.bfloat16: DType.BF16, torch.float16: DType.FP16, torch.float32: DType.TF32}
_OUT_DTYPES = {torch.bfloat16: DType.BF16, torch.float16: DType.FP16, torch.float32: DType.FP32}
_CL = torch.channels_last

BIAS_ALIGN_BYTES = 16
_SCALARS = (int, str)
_cudnn_benchmark = torch._C._get_cudnn_benchmark
"""``torch.backends.cudnn.benchmark`` without its Python descriptor (memo keys: the hit path)."""


def cudnn_vendor_variant() -> str:
    """The conv front-ends' ``vendor_variant``: the vendor records (``autocutlass.vendor``) of
    cuDNN in the mode torch would run now, benchmark mode (the main variant) or PyTorch's default
    (``evaluation.HEURISTIC``), whose plans and times differ; the memo keys hold the mode."""
    return MAIN_VARIANT if _cudnn_benchmark() else HEURISTIC


def suggests_channels_last(t: torch.Tensor) -> bool:
    """Whether torch reads a 4-d tensor's strides as channels_last (``suggest_memory_format``, the
    rule of c10's ``is_channels_last_strides_2d``): ambiguous strides (size-1 dimensions) count as
    channels_last when they are its strides, so a 1x1 filter moved to channels_last, strides
    (C, 1, C, C), suggests it while a contiguous one, (C, 1, 1, 1), does not."""
    if t.dim() != 4:
        return False
    if t.shape[1] > 1 and t.shape[2] > 1 and t.shape[3] > 1:  # no ambiguous dimension: the common case
        dense_cl, dense = t.is_contiguous(memory_format=_CL), t.is_contiguous()
        if dense_cl != dense:  # the strides of one layout, which the rule below would read the same
            return dense_cl
    sizes, strides = t.shape, t.stride()
    if strides[1] == 0:
        return False
    low = 0
    for d in (1, 3, 2, 0):
        if sizes[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * sizes[d] if sizes[d] > 1 else strides[d]
    return True


def _is_cuda(t: torch.Tensor) -> bool:
    return t.is_cuda


def channels_last_input(x: Any, weight: Any, groups: Any, on_gpu: Callable[[torch.Tensor], bool] | None = None) -> Any:
    """``x`` made channels_last where ``F.conv2d`` on CUDA would make it so itself, else ``x``.

    cuDNN runs a convolution channels_last when x or the weight is, and copies the other operand
    to that layout first (``cudnn_conv_suggest_memory_format``). So an NCHW x with a channels_last
    weight, e.g. a GroupNorm's output (CUDA's GroupNorm writes NCHW whatever its input) in a model
    moved to channels_last, costs torch that copy anyway; making it here lets our kernels serve the
    call (they take channels_last x) for the same copy. The output is channels_last either way (the
    weight is), and autograd carries dX back through the copy to x. Only for what the kernels could
    serve: a 4-d CUDA x (``on_gpu``, default ``Tensor.is_cuda``) of bf16, fp16 or fp32, a weight of
    its dtype that is channels_last by its strides (``suggests_channels_last``), one group. Anything else (not tensors
    included) comes back unchanged."""
    if (
        isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor) and x.dim() == 4 and weight.dim() == 4
        and groups == 1 and x.dtype in _DTYPES and weight.dtype is x.dtype
        and weight.is_contiguous(memory_format=_CL) and suggests_channels_last(weight)
        and not x.is_contiguous(memory_format=_CL) and (on_gpu or _is_cuda)(x)
    ):  # fmt: skip
        return x.contiguous(memory_format=_CL)
    return x


def _int(v: Any) -> int | None:
    """``v`` as an int when it is one (a Python int, a numpy integer: ``__index__``), not a bool."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        return None
    return operator.index(v)


def _pair(v: Any, name: str) -> tuple[int, int]:
    one = _int(v)
    if one is not None:
        return (one, one)
    try:
        t = tuple(v)
    except TypeError:
        raise RuntimeError(f"autocutlass.conv2d: {name} must be an int or a pair of ints, got {v!r}") from None
    if len(t) == 1:
        t = (t[0], t[0])
    ints = [_int(i) for i in t]
    if len(t) != 2 or any(i is None for i in ints):
        raise RuntimeError(f"autocutlass.conv2d: {name} must be an int or a pair of ints, got {v!r}")
    return (ints[0], ints[1])  # type: ignore[return-value]


def _key_pair(v: Any) -> tuple[Any, ...]:
    """``v`` (a sequence) as a memo-key part that tells ints from the floats and bools equal to them
    (``(1.0, 1.0) == (1, 1)``): torch rejects those, so their calls must not share an int call's
    entry."""
    try:
        t = tuple(v)
    except TypeError:  # a scalar that is not a Python int (a numpy integer, a float)
        return ("typed", (v.__class__, v))
    if all(i.__class__ is int for i in t):
        return t
    return ("typed", *((i.__class__, i) for i in t))


@dataclass(frozen=True)
class ConvCall:
    """One conv2d call's arguments (stride, dilation as pairs; padding a pair or 'same'/'valid')."""

    x: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None
    stride: Any
    padding: Any
    dilation: Any
    groups: int
    activation: Activation
    residual: torch.Tensor | None


@dataclass(frozen=True)
class ConvPlan:
    """A conv2d the kernel layer serves: the problem and the output to allocate."""

    problem: ConvProblem
    device_index: int
    out_shape: tuple[int, int, int, int]
    out_dtype: torch.dtype

    @property
    def note(self) -> str | None:
        return None


def torch_conv(call: ConvCall) -> torch.Tensor:
    """The call computed by torch: ``F.conv2d``, then the residual, then the activation."""
    y = F.conv2d(call.x, call.weight, call.bias, call.stride, call.padding, call.dilation, call.groups)
    if call.residual is not None:
        y = y.add_(call.residual)
    return activate(y, call.activation)


def expected_output(call: ConvCall) -> torch.Tensor:
    """A meta tensor of the output; raises as ``F.conv2d`` does for invalid calls."""
    x, w, bias, res = call.x, call.weight, call.bias, call.residual
    for name, t in (("input", x), ("weight", w), ("bias", bias), ("residual", res)):
        if (t is not None or name in ("input", "weight")) and not isinstance(t, torch.Tensor):
            raise TypeError(f"autocutlass.conv2d: {name} must be a torch.Tensor, got {type(t).__name__}")
    devices = {t.device for t in (x, w, bias, res) if t is not None}
    if len(devices) > 1:
        raise RuntimeError(f"autocutlass.conv2d: expected all tensors on one device, got {sorted(map(str, devices))}")

    def m(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")

    # checked here with torch's messages: the meta kernel raises ZeroDivisionError/IndexError for them
    if w.dim() != 4:
        raise RuntimeError(f"autocutlass.conv2d: expected a 4-D weight (out, in/groups, kH, kW), got shape {tuple(w.shape)}")
    if x.dim() not in (3, 4):
        raise RuntimeError(f"autocutlass.conv2d: expected a 3-D (unbatched) or 4-D (batched) input, got shape "
                           f"{tuple(x.shape)}")  # fmt: skip
    if min(call.stride) <= 0:
        raise RuntimeError(f"autocutlass.conv2d: non-positive stride is not supported, got {call.stride}")
    if min(call.dilation) <= 0:
        raise RuntimeError(f"autocutlass.conv2d: dilation should be greater than zero, got {call.dilation}")
    if not isinstance(call.padding, str) and min(call.padding) < 0:
        raise RuntimeError(f"autocutlass.conv2d: negative padding is not supported, got {call.padding}")
    if call.groups <= 0:
        raise RuntimeError(f"autocutlass.conv2d: non-positive groups is not supported, got {call.groups}")
    if bias is not None and tuple(bias.shape) != (w.shape[0],):
        raise RuntimeError(f"autocutlass.conv2d: expected bias to be 1-dimensional with {w.shape[0]} elements, "
                           f"but got bias of size {list(bias.shape)}")  # fmt: skip
    shape = _output_shape(call)
    if shape is not None:
        y = torch.empty(shape, dtype=x.dtype, device="meta")
    else:
        y = F.conv2d(m(x), m(w), m(bias), call.stride, call.padding, call.dilation, call.groups)  # type: ignore[arg-type]
    if res is not None:
        if tuple(res.shape) != tuple(y.shape):
            raise RuntimeError(f"autocutlass.conv2d: residual has shape {tuple(res.shape)}, the output {tuple(y.shape)}")
        if res.dtype != y.dtype:
            raise RuntimeError(f"autocutlass.conv2d: residual has dtype {res.dtype}, the output {y.dtype}")
    return y


def _output_shape(call: ConvCall) -> tuple[int, int, int, int] | None:
    """The output's shape for the common valid calls (4-D x and weight of one served dtype, one
    group, a bias of shape (K,), an explicit padding pair or 'valid', or 'same' at stride 1, a
    filter that fits the padded input), or None: then ``F.conv2d`` on meta tensors decides and
    raises torch's errors. Computed here because that meta kernel's Python checks import SymPy on
    first use, half a second of a process's first call. Stride and dilation are pairs here."""
    x, w, bias = call.x, call.weight, call.bias
    if x.dim() != 4 or w.dim() != 4 or x.dtype not in _DTYPES or w.dtype != x.dtype or call.groups != 1:
        return None
    n, c, h, wd = x.shape
    k, wc, r, s = w.shape
    if wc != c or k == 0 or (bias is not None and (tuple(bias.shape) != (k,) or bias.dtype != x.dtype)):
        return None
    (sh, sw), (dh, dw) = call.stride, call.dilation
    if min(sh, sw, dh, dw) < 1:
        return None
    pad = call.padding
    if pad == "same":
        return (n, k, h, wd) if (sh, sw) == (1, 1) else None
    ph, pw = (0, 0) if pad == "valid" else pad
    if isinstance(ph, str) or min(ph, pw) < 0:
        return None
    eh, ew = dh * (r - 1) + 1, dw * (s - 1) + 1
    if h + 2 * ph < eh or wd + 2 * pw < ew:
        return None
    return (n, k, (h + 2 * ph - eh) // sh + 1, (wd + 2 * pw - ew) // sw + 1)


def _padding(call: ConvCall, r: int, s: int) -> tuple[int, int] | None:
    """Symmetric padding per axis, or None when 'same' needs asymmetric padding (even extent)."""
    p = call.padding
    if p == "valid":
        return (0, 0)
    if p == "same":
        dh, dw = call.dilation
        ph, pw = dh * (r - 1), dw * (s - 1)
        if ph % 2 or pw % 2:
            return None
        return (ph // 2, pw // 2)
    return p  # type: ignore[no-any-return]


def plan(call: ConvCall, ctx: PlanContext) -> ConvPlan | Unsupported:
    """Validate ``call`` (raising as torch would) and decide how the kernel layer serves it."""
    y = expected_output(call)
    x, w, bias, res = call.x, call.weight, call.bias, call.residual
    if not ctx.on_gpu(x):
        return Unsupported(f"tensors on {x.device} (autocutlass serves CUDA tensors)")
    dev = x.get_device()
    info = ctx.device_info(dev)
    if (info.cc_major, info.cc_minor) != SERVED_CC:
        return Unsupported(f"GPU {info.gpu_name} (cc {info.cc}) is not served; autocutlass kernels need cc 9.0")
    if x.dtype not in _DTYPES or w.dtype != x.dtype:
        return Unsupported(f"dtype {x.dtype} (weight {w.dtype}) is not served (bfloat16, float16, float32 via TF32)")
    if x.dtype is torch.float32 and not torch.backends.cudnn.allow_tf32:
        return Unsupported("float32 needs TF32, which torch.backends.cudnn.allow_tf32 forbids now")
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, bias, res)):
        return Unsupported("an input requires grad: autograd records conv2d through torch.ops.autocutlass.conv2d "
                           "(autocutlass.conv2d does), not through the dispatcher")
    if y.numel() == 0 or x.numel() == 0:
        return Unsupported("the output or the input is empty")
    if x.dim() != 4:
        return Unsupported(f"an unbatched input of shape {tuple(x.shape)} (the kernels take (N, C, H, W))")
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    pad = _padding(call, r, s)
    if pad is None:
        return Unsupported("padding='same' with an even dilated filter extent pads asymmetrically")
    (sh, sw), (dh, dw) = call.stride, call.dilation
    if not x.is_contiguous(memory_format=_CL) or not w.is_contiguous(memory_format=_CL):
        return Unsupported("x and weight must be channels_last (x.to(memory_format=torch.channels_last)); NCHW runs cuDNN")
    if bias is not None and (bias.dtype != x.dtype or bias.dim() != 1 or bias.stride(0) != 1
                             or bias.data_ptr() % BIAS_ALIGN_BYTES):  # fmt: skip
        return Unsupported(f"bias must be a contiguous, 16-byte aligned ({k},) vector of {x.dtype}")
    if res is not None and not res.is_contiguous(memory_format=_CL):
        return Unsupported("residual must be channels_last")
    elt = x.element_size()
    problem = ConvProblem(
        direction=ConvDirection.FPROP, n=n, h=h, w=wd, c=c, k=k, r=r, s=s,
        stride_h=sh, stride_w=sw, pad_h=pad[0], pad_w=pad[1], dil_h=dh, dil_w=dw, groups=call.groups,
        x_dtype=_DTYPES[x.dtype], w_dtype=_DTYPES[w.dtype], y_dtype=_OUT_DTYPES[x.dtype],
        align_x=min(pow2_align(x.data_ptr()), pow2_align(c * elt)),
        align_w=min(pow2_align(w.data_ptr()), pow2_align(c * elt)),
        align_y=min(16 if res is None else pow2_align(res.data_ptr()), pow2_align(k * elt)),
        epilogue=Epilogue(with_c=res is not None, bias=bias is not None, activation=call.activation),
    )  # fmt: skip
    return ConvPlan(problem, dev, tuple(y.shape), x.dtype)  # type: ignore[arg-type]


class Conv2dFrontEnd:
    """``autocutlass.conv2d(x, weight, bias, stride, padding, dilation, groups, activation, residual)``."""

    name = "conv2d"

    def memo_key(self, policy: Any, x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
                 groups: Any, activation: Any, residual: Any) -> tuple[Any, ...]:  # fmt: skip
        return (
            self, policy,
            torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                         or (bias is not None and bias.requires_grad)
                                         or (residual is not None and residual.requires_grad)),
            x.dtype is torch.float32 and torch.backends.cudnn.allow_tf32,
            x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15,
            weight.shape, weight.stride(), weight.dtype, weight.get_device(), weight.data_ptr() & 15,
            None if bias is None else meta(bias), None if residual is None else meta(residual),
            stride if stride.__class__ is int else _key_pair(stride),
            padding if padding.__class__ in _SCALARS else _key_pair(padding),
            dilation if dilation.__class__ is int else _key_pair(dilation),
            groups if groups.__class__ is int else (groups.__class__, groups), activation, _cudnn_benchmark(),
        )  # fmt: skip

    vendor_variant = staticmethod(cudnn_vendor_variant)

    def make_call(self, x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, groups: Any,
                  activation: Any, residual: Any) -> ConvCall:  # fmt: skip
        pad = padding if isinstance(padding, str) else _pair(padding, "padding")
        if isinstance(pad, str) and pad not in ("same", "valid"):
            raise ValueError(f"autocutlass.conv2d: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
        if _int(groups) is None:
            raise TypeError(f"autocutlass.conv2d: groups must be an int, not {type(groups).__name__}")
        return ConvCall(x, weight, bias, _pair(stride, "stride"), pad, _pair(dilation, "dilation"), int(groups),
                        parse_activation(activation), residual)  # fmt: skip

    def reject(self, *args: Any) -> None:
        expected_output(self.make_call(*args))

    def expected(self, call: ConvCall) -> None:
        expected_output(call)

    def plan(self, call: ConvCall, ctx: PlanContext) -> ConvPlan | Unsupported:
        return plan(call, ctx)

    def torch_entry(self, call: ConvCall) -> Entry:
        act = call.activation

        def run(x: Any, w: Any, bias: Any, stride: Any, padding: Any, dilation: Any, groups: Any, _act: Any,
                residual: Any) -> torch.Tensor:  # fmt: skip
            return torch_conv(ConvCall(x, w, bias, stride, padding, dilation, groups, act, residual))

        return run

    def kernel_entry(self, plan: ConvPlan, runner: Callable[..., None], call: ConvCall) -> Entry:
        shape, dtype, device = plan.out_shape, plan.out_dtype, call.x.device

        def run(x: Any, w: Any, bias: Any, _stride: Any, _padding: Any, _dilation: Any, _groups: Any, _act: Any,
                residual: Any) -> torch.Tensor:  # fmt: skip
            y = torch.empty(shape, dtype=dtype, device=device, memory_format=_CL)
            runner(x, w, y, bias=bias, residual=residual, alpha=1.0, beta=0.0 if residual is None else 1.0)
            return y

        return on_device(run, plan.device_index)


CONV2D = Conv2dFrontEnd()
