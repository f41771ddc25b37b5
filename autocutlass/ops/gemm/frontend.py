"""Validation and planning of one call: tensors in; an error, a ``KernelPlan`` or an ``Unsupported``.

Runs only when dispatch's memo misses (once per tensor-metadata fingerprint), so it may be
thorough. It never launches work on a GPU and never imports ``kernels``, ``search`` or ``db``.

Three outcomes, in this order:

1. **Errors** the torch op would raise, raised here: shapes that cannot be multiplied
   (``RuntimeError`` naming both shapes; torch's own shape rules are applied to meta tensors),
   operands of different dtypes or devices, an ``out=`` of the wrong shape, dtype or device, an
   unknown activation; ``linear``'s ``activation="swiglu"`` with a weight of odd rows (or not 2-D)
   or with a ``residual=``/``mul=`` (``ValueError``). ``scaled_mm`` raises (as ``torch._scaled_mm`` does, or with our message
   naming the argument) for: an argument that is not a tensor (``TypeError``; ``bias``,
   ``scale_result`` and ``out`` may be None), an ``out_dtype`` that is neither None nor a
   ``torch.dtype`` (``TypeError``), a ``use_fast_accum`` that is not a bool (``TypeError``), an
   ``a`` or ``b`` that is not a float8 (or ``float4_e2m1fn_x2``) tensor at all, e.g. bfloat16
   (``RuntimeError`` naming both dtypes), tensors on different devices, a bias whose number of
   elements is not N, and the ``out=``/activation errors above. Scale values are never read.
2. ``Unsupported(reason)``: a valid call autocutlass does not serve (CPU tensors, a GPU other
   than cc 9.0, a dtype other than bf16/fp16/fp32 (float8 inputs of ``matmul``/``linear``/
   ``gemm`` included: fp8 needs scales, so it is served only through ``scaled_mm``), fp32 while
   torch forbids TF32, empty tensors, K = 0, a stride-0 or no-unit-stride operand, autograd,
   ranks other than 2 and 3, a 2-D A broadcast over a 3-D B, a 3-D A whose batch cannot fold
   into M under a 2-D B, an ``out=`` that is not row-major contiguous, a C that is not exactly
   the output's shape, a bias that is not a contiguous, 16-byte aligned (N,) vector). For
   ``scaled_mm`` also everything outside the one served recipe, so that ``torch._scaled_mm``
   serves it or raises its own error: operands other than ``float8_e4m3fn`` x ``float8_e4m3fn``
   (e5m2, mixed e4m3/e5m2, the fnuz types, float4), ``out_dtype`` None (torch's default: fp8
   output) or fp8 or anything but bf16/fp16/fp32, a ``scale_result``, scales that are not
   float32 tensors of one element (row-wise (M, 1)/(1, N), block-wise, other dtypes), a bias
   whose dtype is not ``out_dtype`` or whose shape is not (N,), ``use_fast_accum=False``,
   operands that are not 2-D, an A that is not row-major or a B that is not column-major (fp8
   WGMMA reads only K-major operands), and an A, B or output that is not 16-byte aligned (TMA;
   the fp8 kernels have no narrower path). The torch op then runs instead.
3. ``KernelPlan``: the ``GemmProblem`` and how to present each user tensor to the runner (an
   ``as_strided`` view, never a copy, except the one documented below).

Views (no copies): ``linear`` flattens x's leading dimensions into M and passes ``weight.t()``
(K-contiguous, ``b_major`` COL); ``matmul`` of a 3-D A by a 2-D B folds the batch into M when A's
batch and row dimensions merge (a contiguous A does); a size-1 batch is dropped; the stride of a
size-1 dimension, which addresses nothing, is replaced by a 16-byte multiple so that it neither
lowers the alignment class nor upsets TMA. The one copy: ``linear`` with an x whose leading
dimensions do not merge (K still contiguous) is reshaped, as ``torch.reshape`` would copy it.

SwiGLU (``linear(x, w, bias, activation="swiglu")``): the problem is the fused GEMM, N the
weight's 2N rows (gate, then up), with ``Epilogue.swiglu``; the result and D are (..., N).

fp32 operands are served through TF32 tensor cores only when torch allows TF32 for matmuls
(``torch.backends.cuda.matmul.fp32_precision == "tf32"``, e.g. after
``torch.set_float32_matmul_precision("high")``); otherwise torch computes them in full fp32.

fp8 (``scaled_mm``, a drop-in for ``torch._scaled_mm``): served are A (M, K) row-major and
B = ``W.t()`` of a row-major (N, K) weight, both ``float8_e4m3fn``, with per-tensor float32
scales that stay on the device (the kernel reads them; nothing here reads their values), an
``out_dtype`` of bf16/fp16/fp32, a bias None or (N,) of ``out_dtype``, no ``scale_result`` and
``use_fast_accum=True``. The ``GemmProblem`` is E4M3 x E4M3 -> ``out_dtype``; every E4M3
problem is scaled, so the ``GemmProblem`` has no field for it: dispatch hands the scales to the runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import torch
import torch.nn.functional as F

from autocutlass.device import DeviceInfo
from autocutlass.ops.base import Unsupported
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, GemmProblem, Major

BIAS_ALIGN_BYTES = 16
"""A bias vector's base address must be this aligned (the epilogue reads it with vector loads)."""

SERVED_CC = (9, 0)
"""Compute capability of the GPUs autocutlass's kernels are compiled for (sm_90a)."""

FP8 = torch.float8_e4m3fn
"""The one fp8 format served (``scaled_mm`` only: fp8 without scales is not a useful GEMM)."""

_LOW_PRECISION = frozenset(
    d for d in (getattr(torch, name, None) for name in (
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
    )) if d is not None
)  # fmt: skip
"""Operand dtypes ``torch._scaled_mm`` may accept (its ``isFloat8Type`` or ``Float4_e2m1fn_x2``):
``scaled_mm`` falls back to torch for them; other operand dtypes raise."""

_OPERAND_DTYPES = {torch.bfloat16: DType.BF16, torch.float16: DType.FP16, torch.float32: DType.TF32}
"""Operand dtypes of ``matmul``, ``linear`` and ``gemm``."""
_KERNEL_OPERAND_DTYPES = {**_OPERAND_DTYPES, FP8: DType.E4M3}
_OUTPUT_DTYPES = {torch.bfloat16: DType.BF16, torch.float16: DType.FP16, torch.float32: DType.FP32}
"""Output dtypes; for ``scaled_mm`` also the ``out_dtype`` choices."""


class Op(StrEnum):
    """The public entry points."""

    MATMUL = "matmul"
    LINEAR = "linear"
    GEMM = "gemm"
    SCALED_MM = "scaled_mm"


@dataclass(frozen=True)
class View:
    """How the runner sees one user tensor: ``t.as_strided(shape, stride)``, or with ``copy``
    ``t.reshape(shape)`` (which copies; ``stride`` is then the copy's, row-major)."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    copy: bool = False


@dataclass(frozen=True)
class KernelPlan:
    """A call the kernel layer can serve. ``None`` views mean: pass the user tensor as it is."""

    problem: GemmProblem
    a: View | None
    b: View | None
    c: View | None
    d: View | None
    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    device_index: int
    spans: tuple[int, int, int, int]
    """Bytes from the first to one past the last element of a, b, c (0 if absent) and out:
    dispatch's run-time overlap guard for ``out=``."""

    @property
    def note(self) -> str | None:
        if self.a is not None and self.a.copy:
            return "x's leading dimensions do not merge into M: x is copied on every call"
        return None


@dataclass(frozen=True)
class Call:
    """One call's arguments, in the common form of the entry points."""

    op: Op
    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor | None = None
    """``gemm``'s C (scaled by ``beta``), or ``linear``'s residual (added with ``beta`` 1 before the
    activation: ``act(x W^T + bias + residual)``)."""
    bias: torch.Tensor | None = None
    out: torch.Tensor | None = None
    alpha: float = 1.0
    beta: float = 0.0
    activation: Activation = Activation.NONE
    scale_a: torch.Tensor | None = None
    """``scaled_mm`` only, as ``scale_b``: a tensor on the operands' device; the kernel serves a float32
    tensor of one element (a per-tensor scale), torch anything else it accepts."""
    scale_b: torch.Tensor | None = None
    scale_result: torch.Tensor | None = None
    """``scaled_mm`` only: torch._scaled_mm's ``scale_result`` (an fp8 output's scale); not served,
    passed to torch as given."""
    out_dtype: torch.dtype | None = None
    """``scaled_mm`` only: the result's dtype, None for torch's default (the operands' dtype: fp8
    output, served by torch); the other ops' result has the operands' dtype."""
    mul: torch.Tensor | None = None
    """``linear`` only: a factor the result is multiplied by after the activation,
    ``act(x W^T + bias + residual) * mul`` (a gated MLP's ``act(gate) * up``)."""
    swiglu: bool = False
    """``linear`` only (``activation="swiglu"``, ``activation`` is then SILU): the weight (2N, K)
    packs gate rows then up rows (the bias likewise), the result is ``silu(gate) * up`` (..., N)."""
    fast_accum: bool = False
    """``scaled_mm`` only: torch._scaled_mm's ``use_fast_accum``. Our fp8 kernel accumulates in
    WGMMA's accumulator across all of K, which is fast accumulation; with False (torch's default,
    cuBLAS then promotes partial sums to fp32 periodically) the call runs in torch."""


@dataclass(frozen=True)
class Context:
    """What planning needs beyond the tensors; dispatch fills it in (tests inject fakes)."""

    on_gpu: Callable[[torch.Tensor], bool]
    device_info: Callable[[int], DeviceInfo]
    grad: bool
    """Autograd would record this call (grad mode on and an input requires grad)."""
    tf32: bool
    """torch allows TF32 for fp32 matmuls."""


def parse_activation(activation: Activation | str | None) -> Activation:
    """None or one of 'relu', 'gelu', 'gelu_tanh', 'silu' (or an ``Activation``); else ValueError."""
    if activation is None:
        return Activation.NONE
    try:
        return Activation(activation)
    except ValueError:
        choices = ", ".join(repr(x.value) for x in Activation if x is not Activation.NONE)
        raise ValueError(f"activation={activation!r} is not one of None, {choices}") from None


SWIGLU = "swiglu"
"""``linear``'s extra activation name: ``silu(x W_gate^T + b_gate) * (x W_up^T + b_up)`` of a packed
weight ``cat([W_gate, W_up])``; not an epilogue ``Activation`` of the other ops."""


def parse_linear_activation(activation: Activation | str | None) -> tuple[Activation, bool]:
    """``linear``'s activation: (SILU, True) for 'swiglu', else (``parse_activation``'s, False)."""
    if isinstance(activation, str) and activation == SWIGLU:
        return Activation.SILU, True
    try:
        return parse_activation(activation), False
    except ValueError:
        choices = ", ".join(repr(x.value) for x in Activation if x is not Activation.NONE)
        raise ValueError(f"activation={activation!r} is not one of None, {choices}, {SWIGLU!r}") from None


def swiglu(y: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of a (..., 2N) product whose first N columns are the gate's (out of place,
    so autograd may record it)."""
    gate, up = y.chunk(2, dim=-1)
    return F.silu(gate) * up


# ---- the torch ops (the fallback, and what the kernels must agree with) ----------------------
def torch_call(call: Call) -> torch.Tensor:
    """The call computed by torch, writing into ``call.out`` when given."""
    op, a, b, out = call.op, call.a, call.b, call.out
    if op is Op.SCALED_MM:  # no out= with an activation to apply: compute fresh, then copy
        r = torch._scaled_mm(a, b, call.scale_a, call.scale_b, bias=call.bias, scale_result=call.scale_result,
                             out_dtype=call.out_dtype, use_fast_accum=call.fast_accum)
        r = activate(r, call.activation)
        return r if out is None else out.copy_(r)
    if op is Op.LINEAR:
        r = F.linear(a, b, call.bias)
        if call.swiglu:
            return swiglu(r)
        r = activate(r if call.c is None else r.add_(call.c), call.activation)  # the residual, before act
        return r if call.mul is None else r.mul_(call.mul)  # the factor, after it
    if op is Op.MATMUL or call.c is None or call.beta == 0:
        r = torch.matmul(a, b, out=out)
        return r.mul_(call.alpha) if op is Op.GEMM and call.alpha != 1 else r
    if a.dim() == 2 and b.dim() == 2:
        return torch.addmm(call.c, a, b, beta=call.beta, alpha=call.alpha, out=out)
    if 2 <= a.dim() <= 3 and 2 <= b.dim() <= 3:
        lead = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
        a3 = a if a.dim() == 3 else a.expand(lead, *a.shape)
        b3 = b if b.dim() == 3 else b.expand(lead, *b.shape)
        return torch.baddbmm(call.c, a3, b3, beta=call.beta, alpha=call.alpha, out=out)
    r = torch.matmul(a, b).mul_(call.alpha).add_(call.c, alpha=call.beta)
    return r if out is None else out.copy_(r)


def activate(y: torch.Tensor, act: Activation) -> torch.Tensor:
    if act is Activation.RELU:
        return torch.relu_(y)
    if act is Activation.GELU:
        return F.gelu(y)
    if act is Activation.GELU_TANH:
        return F.gelu(y, approximate="tanh")
    if act is Activation.SILU:
        return F.silu(y, inplace=True)
    return y


# ---- validation --------------------------------------------------------------------------
def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def expected_result(call: Call) -> torch.Tensor:
    """A meta tensor of the result's shape and dtype; raises as torch does for invalid calls."""
    if call.op is Op.SCALED_MM:
        return _expected_scaled(call)
    names = {Op.MATMUL: ("a", "b"), Op.GEMM: ("a", "b"), Op.LINEAR: ("x", "weight")}[call.op]
    c_name = "residual" if call.op is Op.LINEAR else "c"
    tensors = {names[0]: call.a, names[1]: call.b, c_name: call.c, "bias": call.bias, "mul": call.mul, "out": call.out}
    for name, t in tensors.items():
        if (t is not None or name in names) and not isinstance(t, torch.Tensor):  # the operands are required
            raise TypeError(f"autocutlass.{call.op.value}: {name} must be a torch.Tensor, got {type(t).__name__}")
    a, b = call.a, call.b
    if call.swiglu:
        _check_swiglu(call)
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"autocutlass.{call.op.value}: {names[0]} and {names[1]} must have the same dtype, "
            f"got {a.dtype} and {b.dtype}"
        )
    for name in (c_name, "bias", "mul"):
        t = tensors[name]
        if t is not None and t.dtype != a.dtype:
            raise RuntimeError(
                f"autocutlass.{call.op.value}: {name} has dtype {t.dtype}, {names[0]} has {a.dtype}; they must match"
            )
    devices = {name: t.device for name, t in tensors.items() if t is not None and name != "out"}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise RuntimeError(f"autocutlass.{call.op.value}: expected all tensors on one device, got {listed}")
    shape = _result_shape(call)
    if shape is not None:
        r = torch.empty(shape, dtype=a.dtype, device="meta")
        _check_out(call, r)
        return _halved(r) if call.swiglu else r
    try:
        if call.op is Op.LINEAR:
            bias = None if call.bias is None else _meta(call.bias)
            r = F.linear(_meta(a), _meta(b), bias)
        else:
            r = torch.matmul(_meta(a), _meta(b))
    except RuntimeError as e:
        extra = "" if call.bias is None else f" and bias {_shape(call.bias)}"
        raise RuntimeError(
            f"autocutlass.{call.op.value}: {names[0]} {_shape(a)} and {names[1]} {_shape(b)}{extra} "
            f"are not compatible: {e}"
        ) from e
    for name, t in ((c_name, call.c), ("mul", call.mul)):
        if t is not None and not _broadcasts(t, r):
            raise RuntimeError(f"autocutlass.{call.op.value}: {name} of shape {_shape(t)} does not broadcast to "
                               f"the product's {tuple(r.shape)}")  # fmt: skip
    _check_out(call, r)
    return _halved(r) if call.swiglu else r


def _check_swiglu(call: Call) -> None:
    """SwiGLU's own errors: a weight whose rows do not split into gate and up halves, and the
    epilogue operands it does not combine with."""
    w = call.b
    if call.c is not None or call.mul is not None:
        name = "residual" if call.c is not None else "mul"
        raise ValueError(f"autocutlass.linear: activation='swiglu' takes no {name}= (apply it to the result)")
    if not isinstance(w, torch.Tensor) or w.dim() != 2 or w.shape[0] % 2:
        shape = _shape(w) if isinstance(w, torch.Tensor) else type(w).__name__
        raise ValueError(
            f"autocutlass.linear: activation='swiglu' needs a (2N, K) weight packing gate rows then up rows; "
            f"got weight {shape}"
        )


def _halved(r: torch.Tensor) -> torch.Tensor:
    """The (..., N) result of a SwiGLU linear whose product is (..., 2N)."""
    return torch.empty((*r.shape[:-1], r.shape[-1] // 2), dtype=r.dtype, device="meta")


def _broadcasts(t: torch.Tensor, r: torch.Tensor) -> bool:
    """Whether ``t`` broadcasts to ``r``'s shape (without growing it)."""
    try:
        return torch.broadcast_shapes(t.shape, r.shape) == r.shape
    except RuntimeError:
        return False


_SHAPE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _result_shape(call: Call) -> tuple[int, ...] | None:
    """The result's shape for the common valid calls (2-D and 3-D operands of a served dtype whose
    shapes agree, a bias of shape (N,), a C of the result's shape), or None: then torch's meta
    kernels decide and raise torch's errors. Computed here because those kernels' Python checks
    (``torch._check``) import SymPy on first use, half a second of a process's first call."""
    a, b = call.a, call.b
    if a.dtype not in _SHAPE_DTYPES or a.dim() not in (2, 3):
        return None
    if call.op is Op.LINEAR:
        if b.dim() != 2 or a.shape[-1] != b.shape[1]:
            return None
        if call.bias is not None and tuple(call.bias.shape) != (b.shape[0],):
            return None
        shape = (*a.shape[:-1], b.shape[0])
        if any(t is not None and tuple(t.shape) != shape for t in (call.c, call.mul)):
            return None
        return shape
    if b.dim() not in (2, 3) or a.shape[-1] != b.shape[-2]:
        return None
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] != b.shape[0]:
        return None  # broadcast batches
    shape = (*(a.shape[:-2] or b.shape[:-2]), a.shape[-2], b.shape[-1])
    if call.c is not None and tuple(call.c.shape) != shape:
        return None
    return shape


def _check_out(call: Call, r: torch.Tensor) -> None:
    out = call.out
    if out is not None:
        if tuple(out.shape) != tuple(r.shape):
            raise RuntimeError(f"autocutlass.{call.op.value}: out= has shape {_shape(out)}, expected {tuple(r.shape)}")
        if out.dtype != r.dtype:
            raise RuntimeError(f"autocutlass.{call.op.value}: out= has dtype {out.dtype}, expected {r.dtype}")
        if out.device != call.a.device:
            raise RuntimeError(f"autocutlass.{call.op.value}: out= is on {out.device}, the operands on {call.a.device}")


def _expected_scaled(call: Call) -> torch.Tensor:
    """``expected_result`` of ``scaled_mm``: raises only for calls ``torch._scaled_mm`` rejects
    (see the module docstring); whatever else it accepts is left to ``_plan_scaled``, which serves
    it or marks it ``Unsupported``. Only metadata is read (never a scale's value)."""
    tensors = {"a": call.a, "b": call.b, "scale_a": call.scale_a, "scale_b": call.scale_b,
               "bias": call.bias, "scale_result": call.scale_result, "out": call.out}  # fmt: skip
    for name, t in tensors.items():
        required = name in ("a", "b", "scale_a", "scale_b")
        if (t is not None or required) and not isinstance(t, torch.Tensor):
            raise TypeError(f"autocutlass.scaled_mm: {name} must be a torch.Tensor, got {type(t).__name__}")
    od = call.out_dtype
    if od is not None and not isinstance(od, torch.dtype):
        raise TypeError(f"autocutlass.scaled_mm: out_dtype must be a torch.dtype or None, got {type(od).__name__}")
    if not isinstance(call.fast_accum, bool):
        raise TypeError(f"autocutlass.scaled_mm: use_fast_accum must be a bool, got {type(call.fast_accum).__name__}")
    a, b, bias = call.a, call.b, call.bias
    if a.dtype not in _LOW_PRECISION or b.dtype not in _LOW_PRECISION:
        raise RuntimeError(
            f"autocutlass.scaled_mm: a and b must both be float8 (or float4_e2m1fn_x2) tensors, "
            f"got {a.dtype} and {b.dtype}"
        )
    devices = {name: t.device for name, t in tensors.items() if t is not None and name != "out"}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise RuntimeError(f"autocutlass.scaled_mm: expected all tensors on one device, got {listed}")
    try:  # shapes only (float32 metas: torch's matmul need not know the fp8/fp4 dtypes)
        r = torch.matmul(torch.empty(a.shape, device="meta"), torch.empty(b.shape, device="meta"))
    except RuntimeError as e:
        raise RuntimeError(f"autocutlass.scaled_mm: a {_shape(a)} and b {_shape(b)} are not compatible: {e}") from e
    r = torch.empty(r.shape, dtype=a.dtype if od is None else od, device="meta")
    if bias is not None and a.dim() == 2 and b.dim() == 2 and bias.numel() != b.shape[1]:
        # torch checks the element count only (other ranks: torch raises "must be a matrix" first)
        raise RuntimeError(
            f"autocutlass.scaled_mm: bias has shape {_shape(bias)} ({bias.numel()} elements), "
            f"expected ({b.shape[1]},) for b {_shape(b)}"
        )
    _check_out(call, r)
    return r


# ---- layout analysis -----------------------------------------------------------------------
def pow2_align(nbytes: int) -> int:
    """The largest power of two <= 16 dividing ``nbytes`` (16 for 0)."""
    return 16 if nbytes % 16 == 0 else nbytes & -nbytes


def _pad(n: int, elt: int) -> int:
    """``n`` elements rounded up to a 16-byte multiple: the stride given to a size-1 dimension."""
    per = max(1, 16 // elt)
    return -(-max(n, 1) // per) * per


def _merge(sizes: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int | None] | None:
    """(size, stride) of one dimension standing for ``sizes`` (as ``view`` would merge them), or
    None when they do not merge. The stride is None when every size is 1 (it addresses nothing)."""
    dims = [(s, st) for s, st in zip(sizes, strides, strict=True) if s != 1]
    if not dims:
        return 1, None
    size, stride = dims[-1]
    for s, st in reversed(dims[:-1]):
        if st != size * stride:
            return None
        size *= s
    return size, stride


@dataclass(frozen=True)
class _Matrix:
    """One operand as the runner will see it."""

    major: Major
    view: View
    align: int


def _matrix(
    name: str,
    t: torch.Tensor,
    batch: tuple[int, int | None] | None,
    rows: tuple[int, int | None],
    cols: tuple[int, int | None],
) -> _Matrix | str:
    """Analyse a (rows, cols) or (L, rows, cols) operand given (size, stride) per dimension; a
    stride is None for a dimension of size 1. Returns the runner's view or a reason."""
    elt = t.element_size()
    (r, sr), (c, sc) = rows, cols
    if sr == 0 or sc == 0 or (batch is not None and batch[1] == 0):
        return f"{name} has a stride-0 (broadcast) dimension; TMA cannot read it (call .contiguous())"
    if sc == 1 or (sc is None and sr != 1):
        major, ld = Major.ROW, sr if sr is not None else _pad(c, elt)
        inner = (ld, 1)
    elif sr == 1 or sr is None:
        major, ld = Major.COL, sc if sc is not None else _pad(r, elt)
        inner = (1, ld)
    else:
        return f"{name} has no unit stride in its last two dimensions (strides {sr}, {sc}); TMA needs one"
    align = min(pow2_align(t.data_ptr()), pow2_align(ld * elt))
    if batch is None:
        return _Matrix(major, View((r, c), inner), align)
    lsize, lstride = batch
    lstride = lstride if lstride is not None else _pad(r * c, elt)
    align = min(align, pow2_align(lstride * elt))
    return _Matrix(major, View((lsize, r, c), (lstride, *inner)), align)


def _dims(t: torch.Tensor) -> list[tuple[int, int | None]]:
    return [(s, st if s != 1 else None) for s, st in zip(t.shape, t.stride(), strict=True)]


def byte_span(t: torch.Tensor | None) -> int:
    """Bytes from ``t``'s first to one past its last element (0 for None or empty): the extent
    dispatch's overlap guard compares with ``out=``'s."""
    if t is None or t.numel() == 0:
        return 0
    return (sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True)) + 1) * t.element_size()


def _same_view(t: torch.Tensor, v: View) -> View | None:
    """None when ``t`` already has ``v``'s shape and strides (no view needed)."""
    if not v.copy and tuple(t.shape) == v.shape and tuple(t.stride()) == v.stride:
        return None
    return v


# ---- planning ------------------------------------------------------------------------------
def plan(call: Call, ctx: Context) -> KernelPlan | Unsupported:
    """Validate ``call`` (raising as torch would) and decide how the kernel layer serves it."""
    result = expected_result(call)
    a, b = call.a, call.b
    if not ctx.on_gpu(a):
        return Unsupported(f"tensors on {a.device} (autocutlass serves CUDA tensors)")
    dev = a.get_device()
    info = ctx.device_info(dev)
    if (info.cc_major, info.cc_minor) != SERVED_CC:
        return Unsupported(f"GPU {info.gpu_name} (cc {info.cc}) is not served; autocutlass kernels need cc 9.0")
    if call.op is Op.SCALED_MM:
        pass  # its operand dtypes and scales are checked by _plan_scaled
    elif a.dtype is FP8:
        return Unsupported(
            f"{FP8} operands are served only through autocutlass.scaled_mm (fp8 GEMMs need per-tensor scales)"
        )
    elif a.dtype not in _OPERAND_DTYPES:
        return Unsupported(f"dtype {a.dtype} is not served (bfloat16, float16, float32; {FP8} through scaled_mm)")
    if a.dtype is torch.float32 and not ctx.tf32:
        return Unsupported(
            "float32 needs TF32, which torch forbids now (torch.backends.cuda.matmul.fp32_precision != 'tf32'); "
            "call torch.set_float32_matmul_precision('high') to allow it"
        )
    if ctx.grad:
        return Unsupported("an input requires grad; autocutlass kernels have no backward (use torch.no_grad())")
    if result.numel() == 0:
        return Unsupported("the result is empty")
    if a.shape[-1] == 0:
        return Unsupported("K = 0: the result is all zeros (plus beta * C)")
    if call.out is not None and not call.out.is_contiguous():
        return Unsupported("out= is not contiguous row-major")
    if call.op is Op.LINEAR:
        return _plan_linear(call, result, dev)
    if call.op is Op.SCALED_MM:
        return _plan_scaled(call, result, dev)
    return _plan_matmul(call, result, dev)


def _bias_reason(bias: torch.Tensor | None, n: int | None = None) -> str | None:
    """Why the epilogue cannot read ``bias`` as an (N,) vector (``n``: N, when known; a (1,) bias
    that broadcasts is valid for torch, but the kernel reads N values), or None."""
    if bias is None:
        return None
    if n is not None and tuple(bias.shape) != (n,):
        return f"bias of shape {_shape(bias)} is not a contiguous (N,) vector (N = {n}): the epilogue reads {n} values"
    if bias.dim() != 1 or (bias.shape[0] > 1 and bias.stride(0) != 1):
        return f"bias of shape {_shape(bias)} (stride {bias.stride()}) is not a contiguous (N,) vector"
    if bias.data_ptr() % BIAS_ALIGN_BYTES:
        return f"bias is not {BIAS_ALIGN_BYTES}-byte aligned"
    return None


def _plan_linear(call: Call, result: torch.Tensor, dev: int) -> KernelPlan | Unsupported:
    x, w = call.a, call.b
    if x.dim() < 2 or w.dim() != 2:
        return Unsupported(f"linear of a {x.dim()}-D x by a {w.dim()}-D weight is served by torch")
    bias = call.bias
    reason = _bias_reason(bias, w.shape[0])  # (N,), or (2N,) for swiglu: the weight's rows
    if reason is not None:
        return Unsupported(reason)
    n, k = w.shape
    xd = _dims(x)
    merged = _merge(x.shape[:-1], x.stride()[:-1])
    copy = merged is None
    if copy:
        if x.stride(-1) != 1:
            return Unsupported("x's leading dimensions do not merge into M and K is not contiguous")
        m = result.numel() // result.shape[-1]
        am: _Matrix | str = _Matrix(Major.ROW, View((m, k), (k, 1), copy=True), pow2_align(k * x.element_size()))
    else:
        assert merged is not None
        m = merged[0]
        am = _matrix("x", x, None, merged, xd[-1])
    bm = _matrix("weight.t()", w, None, _dims(w)[1], _dims(w)[0])
    for got in (am, bm):
        if isinstance(got, str):
            return Unsupported(got)
    assert isinstance(am, _Matrix) and isinstance(bm, _Matrix)
    cm = None
    if call.c is not None and call.mul is not None:
        return Unsupported("a residual and a mul together (the epilogue reads one C operand); served by torch")
    if call.c is not None or call.mul is not None:
        # the residual: the epilogue's C, added with beta = 1 before the activation; or the mul:
        # C multiplying after it (c_mul)
        c, name = (call.c, "residual") if call.c is not None else (call.mul, "mul")
        assert c is not None
        got_c = _row_major_c(c, name, result, 1)
        if isinstance(got_c, Unsupported):
            return got_c
        cm = got_c
    epi = Epilogue(with_c=cm is not None, bias=bias is not None, activation=call.activation,
                   c_mul=call.mul is not None, swiglu=call.swiglu)  # fmt: skip
    return _kernel_plan(call, result, dev, am, bm, cm, (m, n), 1, epi, x if not copy else None)


def _row_major_c(c: torch.Tensor, name: str, result: torch.Tensor, l: int) -> _Matrix | Unsupported:
    """The epilogue's C operand ``c`` (named ``name`` in reasons): of exactly the result's shape,
    its rows folding into M like the product's (or batched as it is, ``l`` > 1), N-contiguous."""
    if tuple(c.shape) != tuple(result.shape):
        return Unsupported(f"{name} of shape {_shape(c)} is broadcast to {tuple(result.shape)}; served by torch")
    cdims = _dims(c)
    if l > 1:
        got = _matrix(name, c, cdims[0], cdims[-2], cdims[-1])
    else:
        rows = _merge(c.shape[:-1], c.stride()[:-1])
        if rows is None:
            return Unsupported(f"{name}'s leading dimensions do not fold into M like the product's; served by torch")
        got = _matrix(name, c, None, rows, cdims[-1])
    if isinstance(got, str):
        return Unsupported(got)
    if got.major is not Major.ROW:
        return Unsupported(f"{name} is not N-contiguous (row-major); served by torch")
    return got


def _plan_matmul(call: Call, result: torch.Tensor, dev: int) -> KernelPlan | Unsupported:
    a, b = call.a, call.b
    if not (2 <= a.dim() <= 3 and 2 <= b.dim() <= 3):
        return Unsupported(f"{call.op.value} of a {a.dim()}-D and a {b.dim()}-D tensor is served by torch")
    ad, bd = _dims(a), _dims(b)
    la = ad[0][0] if a.dim() == 3 else 1
    lb = bd[0][0] if b.dim() == 3 else 1
    m, k = ad[-2][0], ad[-1][0]
    n = bd[-1][0]
    rows_a = ad[-2]
    batch_a = batch_b = None
    if la > 1 and lb > 1:
        l = la
        batch_a, batch_b = ad[0], bd[0]
    elif lb > 1:
        return Unsupported("a 2-D A broadcast over a 3-D B is served by torch (no stride-0 batch for TMA)")
    elif la > 1:
        merged = _merge(a.shape[:2], a.stride()[:2])
        if merged is None:
            return Unsupported(
                "3-D A under a 2-D B: A's batch does not fold into M (rows not contiguous across batches); "
                "served by torch (call .contiguous() on A to fold)"
            )
        rows_a, m, l = merged, merged[0], 1
    else:
        l = 1
    am = _matrix("a", a, batch_a, rows_a, ad[-1])
    bm = _matrix("b", b, batch_b, bd[-2], bd[-1])
    for got in (am, bm):
        if isinstance(got, str):
            return Unsupported(got)
    assert isinstance(am, _Matrix) and isinstance(bm, _Matrix)
    cm: _Matrix | None = None
    with_c = call.op is Op.GEMM and call.c is not None and call.beta != 0
    if with_c:
        assert call.c is not None
        got_c = _row_major_c(call.c, "c", result, l)
        if isinstance(got_c, Unsupported):
            return got_c
        cm = got_c
    epi = Epilogue(with_c=with_c, bias=False, activation=Activation.NONE)
    return _kernel_plan(call, result, dev, am, bm, cm, (m, n), l, epi, a)


K_MAJOR_ONLY = "fp8 WGMMA reads only K-major operands: A row-major (M, K), B = W.t() of an (N, K) weight"
"""Why ``scaled_mm`` of other layouts runs in torch (the 16-bit types' transposed-operand paths do
not exist for fp8, and a copy would cost more than cuBLAS's kernel)."""


FAST_ACCUM_ONLY = (
    "use_fast_accum=False: autocutlass's fp8 kernel accumulates in WGMMA's accumulator across all of K "
    "(use_fast_accum=True semantics); cuBLAS's periodic fp32 promotion is served by torch"
)


ONLY_E4M3 = "only float8_e4m3fn x float8_e4m3fn is served"
FP8_OUTPUT = (
    "out_dtype None/fp8: fp8 output is served by torch; pass out_dtype=torch.bfloat16/float16/float32"
)
PER_TENSOR_ONLY = "per-tensor scales only; row-wise scaling is served by torch"


def _scaled_recipe_reason(call: Call) -> str | None:
    """Why a valid ``scaled_mm`` call is outside the one recipe the fp8 kernel serves, or None."""
    a, b, od = call.a, call.b, call.out_dtype
    if a.dtype is not FP8 or b.dtype is not FP8:
        return f"{ONLY_E4M3} (got {a.dtype} x {b.dtype})"
    if od is None or od in _LOW_PRECISION:
        return f"{FP8_OUTPUT} (got out_dtype={od})"
    if od not in _OUTPUT_DTYPES:
        return f"out_dtype={od} is not served (bfloat16, float16, float32); served by torch"
    if call.scale_result is not None:
        return "scale_result (the scale of an fp8 output) is served by torch"
    for name, s in (("scale_a", call.scale_a), ("scale_b", call.scale_b)):
        assert s is not None
        if s.dtype is not torch.float32:
            return f"{name} has dtype {s.dtype}: only float32 per-tensor scales are served; torch decides"
        if s.numel() != 1:
            return f"{PER_TENSOR_ONLY} ({name} has shape {_shape(s)})"
    if call.bias is not None and call.bias.dtype != od:
        return f"bias has dtype {call.bias.dtype}, out_dtype is {od}: only a bias of out_dtype is served"
    if not call.fast_accum:
        return FAST_ACCUM_ONLY
    return None


def _plan_scaled(call: Call, result: torch.Tensor, dev: int) -> KernelPlan | Unsupported:
    a, b = call.a, call.b
    reason = _scaled_recipe_reason(call)
    if reason is not None:
        return Unsupported(reason)
    if a.dim() != 2 or b.dim() != 2:
        return Unsupported(f"scaled_mm of a {a.dim()}-D and a {b.dim()}-D tensor is served by torch")
    ad, bd = _dims(a), _dims(b)
    am = _matrix("a", a, None, ad[0], ad[1])
    bm = _matrix("b", b, None, bd[0], bd[1])
    for got in (am, bm):
        if isinstance(got, str):
            return Unsupported(got)
    assert isinstance(am, _Matrix) and isinstance(bm, _Matrix)
    if am.major is not Major.ROW or bm.major is not Major.COL:
        return Unsupported(
            f"{K_MAJOR_ONLY} (got a with strides {a.stride()}, b with strides {b.stride()}); served by torch"
        )
    reason = _bias_reason(call.bias, b.shape[1])
    if reason is not None:
        return Unsupported(reason)
    epi = Epilogue(with_c=False, bias=call.bias is not None, activation=call.activation)
    kp = _kernel_plan(call, result, dev, am, bm, None, (a.shape[0], b.shape[1]), 1, epi, a)
    pr = kp.problem
    for name, align in (("a", pr.align_a), ("b", pr.align_b), ("the output", pr.align_d)):
        if align < 16:
            return Unsupported(
                f"{name} is only {align}-byte aligned (base pointer or leading dimension); the fp8 kernels "
                "read and write through TMA, which needs 16: 16-byte aligned tensors, K a multiple of 16 and "
                "N times out_dtype's size a multiple of 16 bytes"
            )
    return kp


def _kernel_plan(
    call: Call,
    result: torch.Tensor,
    dev: int,
    am: _Matrix,
    bm: _Matrix,
    cm: _Matrix | None,
    mn: tuple[int, int],
    l: int,
    epi: Epilogue,
    a_src: torch.Tensor | None,
) -> KernelPlan:
    m, n = mn
    nd = n // 2 if epi.swiglu else n  # D's columns (SwiGLU: the GEMM's N is gate and up columns)
    k = call.a.shape[-1]
    out = call.out
    d_align = 16 if out is None else pow2_align(out.data_ptr())
    d_align = min(d_align, pow2_align(nd * result.element_size()))
    d_shape = (l, m, nd) if l > 1 else (m, nd)
    d_stride = (m * nd, nd, 1) if l > 1 else (nd, 1)
    if l > 1:
        d_align = min(d_align, pow2_align(m * nd * result.element_size()))
    d_view = View(d_shape, d_stride) if d_shape != tuple(result.shape) or m == 1 or nd == 1 else None
    a_view = am.view if a_src is None else _same_view(a_src, am.view)
    in_dt, out_dt = _KERNEL_OPERAND_DTYPES[call.a.dtype], _OUTPUT_DTYPES[result.dtype]
    problem = GemmProblem(
        m=m,
        n=n,
        k=k,
        l=l,
        a_dtype=in_dt,
        b_dtype=in_dt,
        c_dtype=out_dt if cm is not None else None,
        d_dtype=out_dt,
        a_major=am.major,
        b_major=bm.major,
        align_a=am.align,
        align_b=bm.align,
        align_c=cm.align if cm is not None else 16,
        align_d=d_align,
        epilogue=epi,
    )
    c_view = None
    c_src = call.c if call.c is not None else call.mul  # the epilogue's C: the residual, C, or the mul
    if cm is not None:
        assert c_src is not None
        c_view = _same_view(c_src, cm.view)
    return KernelPlan(
        problem=problem,
        a=a_view,
        b=_same_view(call.b, bm.view),
        c=c_view,
        d=d_view,
        out_shape=tuple(result.shape),
        out_dtype=result.dtype,
        device_index=dev,
        spans=(byte_span(call.a), byte_span(call.b), byte_span(c_src), byte_span(result)),
    )
