"""``autocutlass.grouped_mm``'s front-end: validation, planning and launch of one grouped GEMM.

``grouped_mm(x, w, offs=None, *, bias=None, out_dtype=None, activation=None)`` has the semantics of
``torch._grouped_mm(x, w, offs)`` (the four forms below), plus a per-group bias, an ``out_dtype``
and a fused activation: ``act(x_g @ w_g + bias[g])`` for every group g.

Forms (``Form``), as torch names them by the operands' ranks:

* ``2d_3d`` (the mixture-of-experts forward, and its dX): x (T, K) with rows sorted by group,
  w (E, K, N) (any of its two last dimensions contiguous: a transposed (E, N, K) weight too),
  ``offs`` (E,) int32 cumulative row ends; out (T, N), rows ``offs[g-1]:offs[g]`` are x's rows
  of group g times w[g]. Groups may be empty; rows past ``offs[-1]`` are zero.
* ``2d_2d`` (the weight gradient: groups along K): x (M, Ktot), w (Ktot, N), ``offs`` (E,)
  cumulative ends along Ktot; out (E, M, N), out[g] = x[:, offs[g-1]:offs[g]] @ w[offs[g-1]:offs[g]].
* ``3d_3d`` (batched): x (E, M, K), w (E, K, N), no ``offs``; out (E, M, N).
* ``3d_2d``: x (E, M, K), w (K, Ntot), ``offs`` (E,) cumulative ends along Ntot; out (M, Ntot).

``bias`` is (E, N), one row per group, in the output's dtype (forms ``2d_3d``, ``2d_2d``,
``3d_3d``). ``out_dtype`` is None (x's dtype), x's dtype, or float32 (from bf16/fp16 inputs).
The result is always a new row-major contiguous tensor.

Three outcomes, as for the other ops:

1. **Errors** (``RuntimeError`` as ``torch._grouped_mm`` raises them, worded with the shapes):
   operands that are not 2-D or 3-D, ``offs`` missing (or given for 3-D x 3-D), ``offs`` not a
   1-D int32 tensor, not on x's device or of another length than the groups, x and w of
   different dtypes or of a dtype other than bfloat16/float16/float32, mismatched contraction or
   group dimensions, leading strides that are not 16-byte multiples (torch's rule), a bias of
   the wrong shape, dtype or device, an ``out_dtype`` not served, an unknown activation; and
   ``offs`` values that are negative, decreasing or past the dimension they split. Values are
   read where that costs no synchronisation (``offs`` on the CPU, on every call) and otherwise
   once per memo key, on dispatch's miss path (one device-to-host copy; skipped while a CUDA
   graph is captured or torch.compile traces). The kernel clamps every group's rows into
   [previous end, T], so bad values of a later call cannot make it read or write out of bounds.
2. ``Unsupported(reason)``: valid calls run by ``torch._grouped_mm`` (then bias and activation),
   logged once per reason: CPU tensors, GPUs other than sm_90, forms other than ``2d_3d``,
   float32 operands, an x whose K is not contiguous, empty outputs, autograd.
3. A ``GroupedPlan``: the ``GroupedGemmProblem`` and the output to allocate.

The runner convention (``kernels.hopper_grouped``; ``evaluation``): ``runner(x, w, offs, out, *,
bias=None)`` with x (T, K) K-contiguous, w (E, K, N) N- or K-contiguous, offs (E,) int32 on the
device, out (T, N) row-major (written, never read; rows past ``offs[-1]`` written as zeros), bias
(E, N) contiguous or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch

from autocutlass.ops.base import Entry, PlanContext, Unsupported
from autocutlass.ops.gemm.frontend import (
    SERVED_CC,
    activate,
    parse_activation,
    pow2_align,
)
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.grouped.tail import zero_tail
from autocutlass.ops.launch import meta, on_device
from autocutlass.ops.types import Activation, DType, Epilogue, Major

NAME = "grouped_mm"
OPERAND_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
"""What ``torch._grouped_mm`` multiplies (its CPU and CUDA fallback paths)."""
_KERNEL_DTYPES = {torch.bfloat16: DType.BF16, torch.float16: DType.FP16}
_OUT_DTYPES = {torch.bfloat16: DType.BF16, torch.float16: DType.FP16, torch.float32: DType.FP32}
BIAS_ALIGN_BYTES = 4
"""The epilogue reads the bias element by element: its base needs only the element's alignment."""


class Form(StrEnum):
    """The four ``torch._grouped_mm`` forms, by the ranks of x and w."""

    M_GROUPED = "2d_3d"
    K_GROUPED = "2d_2d"
    BATCHED = "3d_3d"
    N_GROUPED = "3d_2d"


def form_of(x: torch.Tensor, w: torch.Tensor) -> Form:
    return {(2, 3): Form.M_GROUPED, (2, 2): Form.K_GROUPED, (3, 3): Form.BATCHED, (3, 2): Form.N_GROUPED}[
        (x.dim(), w.dim())
    ]


@dataclass(frozen=True)
class GroupedCall:
    """One call's arguments (activation parsed)."""

    x: torch.Tensor
    w: torch.Tensor
    offs: torch.Tensor | None
    bias: torch.Tensor | None = None
    out_dtype: torch.dtype | None = None
    activation: Activation = Activation.NONE


@dataclass(frozen=True)
class GroupedPlan:
    """A call the kernel layer serves: the problem and the output to allocate."""

    problem: GroupedGemmProblem
    device_index: int
    out_shape: tuple[int, int]
    out_dtype: torch.dtype

    @property
    def note(self) -> str | None:
        return None


# ---- validation ------------------------------------------------------------------------------
def _err(message: str) -> RuntimeError:
    return RuntimeError(f"autocutlass.{NAME}: {message}")


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def _check_strides(name: str, t: torch.Tensor) -> None:
    """torch's rule: one of the last two dimensions contiguous, the other's stride a 16-byte
    multiple (and at least that dimension's extent)."""
    align = 16 // t.element_size()
    s_rows, s_cols = t.stride(-2), t.stride(-1)
    rows, cols = t.shape[-2], t.shape[-1]
    if s_cols == 1 and s_rows >= max(1, cols):
        lead = s_rows
    elif s_rows == 1 and s_cols >= max(1, rows):
        lead = s_cols
    else:
        raise _err(f"{name} {_shape(t)} with strides {t.stride()} has no contiguous dimension among its last two "
                   "(torch._grouped_mm needs a row- or column-major matrix)")  # fmt: skip
    if lead % align:
        raise _err(f"{name} {_shape(t)} with strides {t.stride()}: strides should be multiple of 16 bytes "
                   f"(the leading stride {lead} is not a multiple of {align} elements of {t.dtype})")  # fmt: skip


def expected_output(call: GroupedCall) -> torch.Tensor:
    """A meta tensor of the result (shape and dtype); raises as ``torch._grouped_mm`` does for
    invalid calls (see the module docstring). Reads no values."""
    x, w, offs, bias, od = call.x, call.w, call.offs, call.bias, call.out_dtype
    for name, t in (("x", x), ("w", w), ("offs", offs), ("bias", bias)):
        if (t is not None or name in ("x", "w")) and not isinstance(t, torch.Tensor):
            raise TypeError(f"autocutlass.{NAME}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if od is not None and not isinstance(od, torch.dtype):
        raise TypeError(f"autocutlass.{NAME}: out_dtype must be a torch.dtype or None, got {type(od).__name__}")
    if x.dim() not in (2, 3) or w.dim() not in (2, 3):
        raise _err(f"x and w must be 2D or 3D but got x.dim()={x.dim()} and w.dim()={w.dim()}")
    form = form_of(x, w)
    if x.dtype not in OPERAND_DTYPES:
        raise _err(f"x must be a float32, bfloat16 or float16 matrix, got {x.dtype}")
    if w.dtype != x.dtype:
        raise _err(f"x and w must have the same dtype, got {x.dtype} and {w.dtype}")
    if w.device != x.device:
        raise _err(f"x is on {x.device}, w on {w.device}: expected all tensors on one device")
    if form is not Form.K_GROUPED and x.shape[-1] != w.shape[-2]:
        raise _err(f"contraction dimension of x and w must match: x {_shape(x)}, w {_shape(w)}")
    if form is Form.K_GROUPED and x.shape[1] != w.shape[0]:
        raise _err(f"contraction dimension of x and w must match: x {_shape(x)}, w {_shape(w)} (groups along K)")
    if form is Form.BATCHED:
        if offs is not None:
            raise _err("offsets tensor provided, but it is not needed for 3D x 3D (batched) operands")
        if x.shape[0] != w.shape[0]:
            raise _err(f"batched dimension has to match: x {_shape(x)}, w {_shape(w)}")
        groups = x.shape[0]
    else:
        if offs is None:
            raise _err(f"offsets tensor not provided, but it is needed for {x.dim()}D x {w.dim()}D operands")
        if offs.dim() != 1:
            raise _err(f"offs has to be 1D, got shape {_shape(offs)}")
        if offs.dtype != torch.int32:
            raise _err(f"offsets have to be int32, got {offs.dtype}")
        if offs.device != x.device:
            raise _err(f"offs is on {offs.device}, x on {x.device}: offs must be on the operands' device")
        groups = offs.shape[0]
        if form is Form.M_GROUPED and groups != w.shape[0]:
            raise _err(f"matrix batch sizes have to match: offs has {groups} groups, w {_shape(w)} has {w.shape[0]}")
        if form is Form.N_GROUPED and groups != x.shape[0]:
            raise _err(f"matrix batch sizes have to match: offs has {groups} groups, x {_shape(x)} has {x.shape[0]}")
    _check_strides("x", x)
    _check_strides("w", w)
    if od is None or od == x.dtype:
        out_dt = x.dtype
    elif od == torch.float32:
        out_dt = od
    else:
        raise _err(f"out_dtype={od} is not served: None, the operands' dtype ({x.dtype}) or torch.float32")
    out_shape = {
        Form.M_GROUPED: (x.shape[0], w.shape[-1]),
        Form.K_GROUPED: (groups, x.shape[0], w.shape[1]),
        Form.BATCHED: (groups, x.shape[1], w.shape[-1]),
        Form.N_GROUPED: (x.shape[1], w.shape[1]),
    }[form]
    if bias is not None:
        if form is Form.N_GROUPED:
            raise _err("bias is not supported for 3D x 2D operands (groups along N)")
        want = (groups, out_shape[-1])
        if tuple(bias.shape) != want:
            raise _err(f"bias has shape {_shape(bias)}, expected {want}: one row of N per group")
        if bias.dtype != out_dt:
            raise _err(f"bias has dtype {bias.dtype}, the output {out_dt}; they must match")
        if bias.device != x.device:
            raise _err(f"bias is on {bias.device}, x on {x.device}: expected all tensors on one device")
    return torch.empty(out_shape, dtype=out_dt, device="meta")


def split_extent(call: GroupedCall) -> tuple[str, int]:
    """(name, size) of the dimension ``offs`` splits: x's rows (2d_3d), K (2d_2d), N (3d_2d)."""
    form = form_of(call.x, call.w)
    if form is Form.M_GROUPED:
        return "T (x's rows)", call.x.shape[0]
    if form is Form.K_GROUPED:
        return "K (x's columns)", call.x.shape[1]
    return "N (w's columns)", call.w.shape[1]


def check_offsets(values: list[int], name: str, extent: int) -> None:
    """Raise ``RuntimeError`` for offsets that are not cumulative ends within ``extent``."""
    prev = 0
    for i, v in enumerate(values):
        if v < prev:
            what = "negative" if i == 0 else f"smaller than offs[{i - 1}] = {prev}"
            raise _err(f"offs must be non-decreasing cumulative ends of the groups: offs[{i}] = {v} is {what}")
        prev = v
    if values and values[-1] > extent:
        raise _err(f"offs[-1] = {values[-1]} is past {name} = {extent}")


def _can_read_values(offs: torch.Tensor) -> bool:
    """``offs``'s values can be read now without a device synchronisation or a trace to break:
    a CPU tensor (not a fake one) outside torch.compile tracing."""
    return offs.device.type == "cpu" and not torch.compiler.is_compiling()


def validate_offsets(call: GroupedCall, *, may_sync: bool) -> None:
    """``check_offsets`` on ``call.offs`` when its values can be read: always for CPU offsets;
    for device offsets only with ``may_sync`` (one copy to the host) and outside a CUDA graph
    capture or a trace."""
    offs = call.offs
    if offs is None or offs.numel() == 0:
        return
    if not _can_read_values(offs):
        if not may_sync or torch.compiler.is_compiling() or offs.device.type != "cuda":
            return
        if torch.cuda.is_current_stream_capturing():
            return
    name, extent = split_extent(call)
    check_offsets([int(v) for v in offs.tolist()], name, extent)


# ---- the torch computation (the fallback, and what the kernel must agree with) -------------
def group_rows(offs: torch.Tensor, rows: int) -> torch.Tensor:
    """The group of each of ``rows`` rows (E, one past the last group, for rows past ``offs[-1]``),
    computed on ``offs``'s device without reading its values: a searchsorted of the row indices."""
    idx = torch.arange(rows, device=offs.device, dtype=torch.int32)
    return torch.searchsorted(offs, idx, right=True)


def torch_grouped(call: GroupedCall) -> torch.Tensor:
    """The call computed by torch: ``torch._grouped_mm`` (in float32 when ``out_dtype`` is wider
    than the operands), rows past ``offs[-1]`` zeroed (2d_3d: ``tail.zero_tail``, on an sm_90
    GPU by a kernel that writes only those rows; 3d_2d: the columns past it), then the bias of each
    row's group,
    then the activation. Row-major contiguous like the kernel's output (torch may pad the rows of
    an unaligned N on CUDA)."""
    x, w, offs, bias = call.x, call.w, call.offs, call.bias
    out_dt = call.out_dtype or x.dtype
    if out_dt == x.dtype:
        y = torch._grouped_mm(x, w, offs)
    else:
        y = torch._grouped_mm(x.float(), w.float(), offs).to(out_dt)
    form = form_of(x, w)
    if form is Form.M_GROUPED:
        # rows past offs[-1] are zero (torch leaves them unwritten); row t belongs to group g(t)
        assert offs is not None
        y = zero_tail(y, offs)
        if bias is not None:
            y = y + torch.cat([bias, bias.new_zeros((1, bias.shape[1]))])[group_rows(offs, y.shape[0])]
    else:
        if form is Form.N_GROUPED:
            # columns past offs[-1] are zero too (torch leaves them unwritten: a backward that
            # reuses this form, e.g. the 2d_2d form's dX, would read them), found on the device
            assert offs is not None
            cols = torch.arange(y.shape[-1], device=y.device, dtype=offs.dtype)
            y = y.masked_fill(cols >= offs[-1], 0) if offs.numel() else y.zero_()  # no group: no column
        if bias is not None:
            y = y + bias.unsqueeze(1)
    y = activate(y, call.activation)
    return y if y.is_contiguous() else y.contiguous()


# ---- planning --------------------------------------------------------------------------------
def plan(call: GroupedCall, ctx: PlanContext) -> GroupedPlan | Unsupported:
    """Validate ``call`` (raising as torch would; device offsets are read once, see the module
    docstring) and decide how the kernel layer serves it."""
    out = expected_output(call)
    validate_offsets(call, may_sync=True)
    x, w, offs, bias = call.x, call.w, call.offs, call.bias
    if not ctx.on_gpu(x):
        return Unsupported(f"tensors on {x.device} (autocutlass serves CUDA tensors)")
    dev = x.get_device()
    info = ctx.device_info(dev)
    if (info.cc_major, info.cc_minor) != SERVED_CC:
        return Unsupported(f"GPU {info.gpu_name} (cc {info.cc}) is not served; autocutlass kernels need cc 9.0")
    form = form_of(x, w)
    if form is not Form.M_GROUPED:
        return Unsupported(f"the {form.value} form (x {x.dim()}D, w {w.dim()}D) has no grouped kernel yet; "
                           "autocutlass serves x 2D x w 3D (groups of rows)")  # fmt: skip
    if x.dtype not in _KERNEL_DTYPES:
        return Unsupported(f"dtype {x.dtype} is not served by the grouped kernels (bfloat16, float16)")
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, bias)):
        return Unsupported("an input requires grad; the grouped kernel has no backward of its own "
                           "(autograd runs through torch.ops.autocutlass.grouped_mm)")  # fmt: skip
    if out.numel() == 0:
        return Unsupported("the output is empty")
    if x.shape[1] == 0:
        return Unsupported("K = 0: the output is all zeros (plus the bias)")
    if x.stride(1) != 1:
        return Unsupported(f"x {_shape(x)} with strides {x.stride()} is column-major; the grouped kernel reads "
                           "K-contiguous rows (call .contiguous())")  # fmt: skip
    if bias is not None and (not bias.is_contiguous() or bias.data_ptr() % BIAS_ALIGN_BYTES):
        return Unsupported(f"bias must be a contiguous ({w.shape[0]}, {w.shape[-1]}) tensor")
    assert offs is not None
    elt, out_elt = x.element_size(), out.element_size()
    w_major = Major.ROW if w.stride(-1) == 1 else Major.COL
    w_lead = w.stride(-2) if w_major is Major.ROW else w.stride(-1)
    problem = GroupedGemmProblem(
        experts=w.shape[0], t=x.shape[0], n=w.shape[-1], k=x.shape[1],
        x_dtype=_KERNEL_DTYPES[x.dtype], w_dtype=_KERNEL_DTYPES[w.dtype], out_dtype=_OUT_DTYPES[out.dtype],
        w_major=w_major,
        align_x=min(pow2_align(x.data_ptr()), pow2_align(x.stride(0) * elt)),
        align_w=min(pow2_align(w.data_ptr()), pow2_align(w_lead * elt),
                    pow2_align(w.stride(0) * elt) if w.shape[0] > 1 else 16),
        align_out=pow2_align(w.shape[-1] * out_elt),
        epilogue=Epilogue(bias=bias is not None, activation=call.activation),
    )  # fmt: skip
    return GroupedPlan(problem, dev, (x.shape[0], w.shape[-1]), out.dtype)


class GroupedMmFrontEnd:
    """``autocutlass.grouped_mm(x, w, offs, bias, out_dtype, activation)``."""

    name = NAME

    def memo_key(self, policy: Any, x: Any, w: Any, offs: Any, bias: Any, out_dtype: Any, activation: Any
                 ) -> tuple[Any, ...]:  # fmt: skip
        return (
            self, policy,
            torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or (bias is not None and bias.requires_grad)),
            x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15,
            w.shape, w.stride(), w.dtype, w.get_device(), w.data_ptr() & 15,
            None if offs is None else (offs.shape, offs.stride(), offs.dtype, offs.device),
            meta(bias), out_dtype, activation,
        )  # fmt: skip

    def make_call(self, x: Any, w: Any, offs: Any, bias: Any, out_dtype: Any, activation: Any) -> GroupedCall:
        return GroupedCall(x, w, offs, bias, out_dtype, parse_activation(activation))

    def reject(self, x: Any, w: Any, offs: Any, bias: Any, out_dtype: Any, activation: Any) -> None:
        expected_output(GroupedCall(x, w, offs, bias, out_dtype))
        parse_activation(activation)

    def expected(self, call: GroupedCall) -> None:
        expected_output(call)
        validate_offsets(call, may_sync=False)

    def plan(self, call: GroupedCall, ctx: PlanContext) -> GroupedPlan | Unsupported:
        return plan(call, ctx)

    def torch_entry(self, call: GroupedCall) -> Entry:
        act = call.activation

        def run(x: Any, w: Any, offs: Any, bias: Any, out_dtype: Any, _act: Any) -> torch.Tensor:
            c = GroupedCall(x, w, offs, bias, out_dtype, act)
            if offs is not None and offs.device.type == "cpu":
                validate_offsets(c, may_sync=False)  # free on the CPU: every call is checked
            return torch_grouped(c)

        return run

    def kernel_entry(self, plan: GroupedPlan, runner: Callable[..., None], call: GroupedCall) -> Entry:
        shape, dtype, device = plan.out_shape, plan.out_dtype, call.x.device

        def run(x: Any, w: Any, offs: Any, bias: Any, _out_dtype: Any, _act: Any) -> torch.Tensor:
            out = torch.empty(shape, dtype=dtype, device=device)
            runner(x, w, offs, out, bias=bias)
            return out

        return on_device(run, plan.device_index)


GROUPED_MM = GroupedMmFrontEnd()
