"""autocutlass's entry points as ``torch.library`` custom ops: what torch.compile traces, what
autograd records, what autocast casts.

**Ops** (namespace ``autocutlass``; each op's real kernel is the dispatcher, so it serves what the
eager entry point serves and runs torch for everything else, CPU tensors included):

* ``matmul(Tensor a, Tensor b) -> Tensor``: ``torch.matmul`` (mm, bmm, a 3-D A folded over a 2-D B,
  any ranks torch takes); ``matmul_out(a, b, Tensor(a!) out) -> ()`` writes ``out``.
* ``linear(Tensor x, Tensor weight, Tensor? bias, str? activation, Tensor? residual=None,
  Tensor? mul=None) -> Tensor``: ``act(F.linear(...) + residual) * mul``; with activation
  'swiglu', ``silu(gate) * up`` of the (..., 2N) ``F.linear`` of a packed weight (..., N).
* ``gemm(Tensor a, Tensor b, Tensor? c, float alpha, float beta) -> Tensor``: ``alpha a@b + beta c``;
  ``gemm_out(..., Tensor(a!) out) -> ()``.
* ``scaled_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor? bias, Tensor? scale_result,
  ScalarType? out_dtype, bool use_fast_accum, str? activation) -> Tensor``: ``act(torch._scaled_mm(...))``;
  ``scaled_mm_out(..., Tensor(a!) out) -> ()``.
* ``conv2d(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, str? padding_mode,
  int[] dilation, int groups, str? activation, Tensor? residual) -> Tensor``: ``act(F.conv2d(...) +
  residual)``; ``padding_mode`` 'same'/'valid' replaces ``padding`` when given.
* ``grouped_mm(Tensor x, Tensor w, Tensor? offs, Tensor? bias, ScalarType? out_dtype, str? activation)
  -> Tensor``: ``act(torch._grouped_mm(x, w, offs) + bias[group])`` (``autocutlass.grouped_mm``).
* ``conv2d_dgrad(Tensor grad_output, Tensor weight, SymInt[] input_size, int[] stride, int[] padding,
  int[] dilation, int groups) -> Tensor``: dX of a convolution (``torch.nn.grad.conv2d_input``);
  ``conv2d_wgrad(Tensor grad_output, Tensor input, SymInt[] weight_size, ...) -> Tensor``: dW
  (``torch.nn.grad.conv2d_weight``). Explicit symmetric padding; the result is channels_last when
  grad_output or the other operand is, else contiguous. conv2d's backward.

Out variants mutate only ``out`` and return nothing (a custom op may not return an alias of an
input; the public function returns ``out``). ``linear`` and ``conv2d`` have none: their entry points
take no ``out=``. The ops are registered when ``autocutlass.api`` is first imported (any entry point,
``autocutlass.nn``, or ``import autocutlass.torch_ops``).

**Fake kernels** are pure shape functions: they run the entry point's own validation on the
tensors' metadata (``ops.gemm.frontend.expected_result``, ``ops.conv.frontend.expected_output``),
so a call the eager API rejects raises the same error while torch.compile traces it (Dynamo
wraps it in ``TorchRuntimeError``, a ``RuntimeError`` whose message holds ours), and return
exactly the layout the real kernel returns: a new row-major contiguous tensor for the GEMM ops;
for ``conv2d`` the layout ``F.conv2d`` gives (channels_last when x or the weight is channels_last,
which every served conv is; contiguous otherwise: the real kernel converts a torch fallback's
output to it, a no-op in practice).

**When the ops are used** (``autocutlass.api``): an eager call goes straight to the dispatcher
(no op boundary, whose dispatch costs about 10-16 us of host time) unless autograd must record it
(grad mode on and an input requires grad) or autocast is on (any device); then, and whenever
torch.compile traces the call (``torch.compiler.is_compiling()``), the public function calls the
graph-path functions of this module, which call ``torch.ops.autocutlass.*``. A compiled graph
therefore holds ``torch.ops.autocutlass.*`` nodes; their real kernels run, when the graph runs,
outside tracing, and read the miss policy then (``autocutlass.policy``, per thread).

**Autograd** (matmul, linear, gemm, conv2d; not scaled_mm: fp8 training is not served, and
``torch._scaled_mm`` has no derivative either). Every backward GEMM is one of our own ops, so it is
fingerprinted, tuned and recorded like any call (dA and dB are other layouts of the same family):

* matmul / gemm, Y = alpha A B (+ beta C): dA = alpha dY B^T, dB = alpha A^T dY (batched as the
  forward; a 3-D A over a 2-D B folds its batch: dB = alpha A_flat^T dY_flat, one GEMM; operands
  broadcast by torch's rules are summed back to their shapes, 1-D operands as torch unsqueezes
  them), dC = beta dY summed to C's shape (None when beta == 0: C is then ignored, as in BLAS).
* linear, Z = X W^T + b over X's leading dimensions flattened: dX = dZ_flat W, dW = dZ_flat^T
  X_flat (written row-major like W, so AccumulateGrad takes it without a copy), db = dZ_flat summed
  over rows, d residual = dZ summed to the residual's shape. (dZ_flat is a view, or one copy when
  dZ's leading dimensions do not merge.)
* grouped_mm: each form's gradients are grouped_mm calls of other forms (``grouped_mm_grads``):
  for x (T, K) by w (E, K, N) with row offsets, dX = grouped_mm(dY, w^T, offs) (the same form)
  and dW = grouped_mm(X^T, dY, offs) (groups along K: dW_g = X_g^T dY_g); for groups along K,
  dX = grouped_mm(dY, w^T, offs) (groups along N) and dW = grouped_mm(X^T, dY, offs) (groups of
  rows); batched: batched; dbias sums dY's rows per group. dY is cast to the operands' dtype (an
  ``out_dtype=float32`` call) and copied with padded rows when its row stride is not a 16-byte
  multiple (``torch._grouped_mm``'s rule). Gradients flow to x, w and bias, never to offs.
* conv2d: dX = ``conv2d_dgrad(dZ, W)`` and dW = ``conv2d_wgrad(dZ, X)``, two dispatcher calls
  fingerprinted as conv2d problems of directions 'dgrad' and 'wgrad' (served by the kernel
  families that compute them, e.g. a pointwise layer's as GEMMs, dX = dY_nhwc W and dW =
  dY_nhwc^T X_nhwc; the rest by ``aten.convolution_backward`` with one logged reason per
  fingerprint); db = dZ summed over N, H, W (torch); d(residual) = dZ. A channels_last forward's
  dZ is made channels_last first; padding 'same' that pads unevenly pads X explicitly first and
  crops dX. The dgrad and wgrad ops are differentiable in turn (both are bilinear: their
  derivatives are a conv2d and the other backward op), so double backward runs our ops too.
  **Eager conv2d training** skips the custom-op machinery: outside torch.compile, autocast,
  functorch transforms and torch dispatch modes, a recording ``conv2d`` of plain tensors and
  parameters runs ``_EagerConv2d``, an ``autograd.Function`` around the op's own body with the same
  saved tensors and backward, whose dgrad and wgrad run as plain calls of the ops' bodies (the ops
  themselves when the backward records, for double backward). Same dispatcher calls, same
  results (a test compares every gradient bit for bit); ``torch.library``'s autograd wrapper
  (argument binding, default filling, redispatch) cost more host time than our dispatch, three
  times per layer and step, which a convnet's training step is bound by at small batches
  (CPU, 40 tiny layers: 21.8 ms per step through the ops, 11.1 ms this way, torch 4.5 ms).

**The fused activation under autograd**: the epilogue writes one tensor, act(Z); silu's and gelu's
derivatives need Z itself, which the output cannot give back. So when autograd records a call
with an activation, the public ``linear``/``conv2d`` run the op *without* the activation and apply
it outside the kernel with torch (``F.silu`` etc.), whose autograd saves Z: one extra elementwise
pass over the output, which Inductor fuses into neighbouring pointwise work under torch.compile,
instead of a second GEMM or convolution. (Keeping Z from the kernel would need a second output
the epilogue does not have, and the elementwise pass costs less than recomputing Z.) linear's and
conv2d's residual stays fused while autograd records: its gradient is dZ itself, so autograd keeps
nothing of it. Inference and no-grad calls keep the fused epilogue. The op itself, called directly
with an activation while autograd records, stays correct: its backward recomputes Z with one
more GEMM. linear's SwiGLU likewise: while autograd records, the op computes the (..., 2N)
product without it and ``silu(gate) * up`` runs in torch (``ops.gemm.frontend.swiglu``); the op
called directly with 'swiglu' recomputes Z in its backward (``swiglu_backward``).

**Autocast**: each op that torch would autocast (``linear``, ``matmul``, ``gemm``, ``conv2d``) has
an Autocast kernel for CPU and CUDA that casts its floating-point inputs (not float64) to the
current autocast dtype, as ``F.linear``/``torch.matmul``/``torch.addmm``/``F.conv2d`` do under
autocast, and runs the op with autocast off. ``gemm``'s C and ``linear``'s and ``conv2d``'s residual are
cast with the other inputs (as ``addmm`` casts its C), so the result has the autocast dtype. Out variants and
``scaled_mm`` are not cast (torch casts neither ``out=`` calls nor ``_scaled_mm``).
"""

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch._subclasses.fake_tensor import unset_fake_temporarily

from autocutlass import api
from autocutlass.dispatch import POLICY_OVERRIDE, torch_served, vendor_margin_of
from autocutlass.ops.conv import frontend as conv_fe
from autocutlass.ops.conv.backward import CONV2D_DGRAD, CONV2D_WGRAD, grad_output_format
from autocutlass.ops.conv.frontend import CONV2D, ConvCall
from autocutlass.ops.gemm import frontend as gemm_fe
from autocutlass.ops.gemm.entries import GEMM, LINEAR, MATMUL, SCALED_MM
from autocutlass.ops.gemm.frontend import Call, Op
from autocutlass.ops.grouped import frontend as grouped_fe
from autocutlass.ops.grouped.frontend import GROUPED_MM, Form, GroupedCall
from autocutlass.ops.types import Activation

NAMESPACE = "autocutlass"
_CL = torch.channels_last


def _define(name: str, schema: str, mutates: Sequence[str] = ()) -> Callable[[Callable[..., Any]], Any]:
    def wrap(fn: Callable[..., Any]) -> Any:
        return torch.library.custom_op(f"{NAMESPACE}::{name}", fn, mutates_args=tuple(mutates), schema=schema)

    return wrap


def _validated(check: Callable[..., Any], *args: Any) -> Any:
    """``check(*args)``, an entry point's own validation, run as in eager: on plain meta tensors,
    outside the fake mode (whose kernels word some shape errors differently), so that a traced call
    raises exactly the eager error. Symbolic sizes stay symbolic (and guarded) there."""
    with unset_fake_temporarily():
        return check(*args)


def _empty_like_meta(r: Tensor, device: torch.device) -> Tensor:
    """A new row-major contiguous tensor of the meta result ``r``'s shape and dtype on ``device``."""
    return torch.empty(r.shape, dtype=r.dtype, device=device)


# ---- matmul -----------------------------------------------------------------------------------
@_define("matmul", "(Tensor a, Tensor b) -> Tensor")
def _matmul(a: Tensor, b: Tensor) -> Tensor:
    return api.dispatcher().call(MATMUL, a, b, None)


@_matmul.register_fake
def _(a: Tensor, b: Tensor) -> Tensor:
    return _empty_like_meta(_validated(gemm_fe.expected_result, Call(Op.MATMUL, a, b)), a.device)


@_define("matmul_out", "(Tensor a, Tensor b, Tensor(a!) out) -> ()", mutates=("out",))
def _matmul_out(a: Tensor, b: Tensor, out: Tensor) -> None:
    api.dispatcher().call(MATMUL, a, b, out)


@_matmul_out.register_fake
def _(a: Tensor, b: Tensor, out: Tensor) -> None:
    _validated(gemm_fe.expected_result, Call(Op.MATMUL, a, b, out=out))


# ---- linear -----------------------------------------------------------------------------------
@_define("linear", "(Tensor x, Tensor weight, Tensor? bias, str? activation, Tensor? residual=None, "
                   "Tensor? mul=None) -> Tensor")  # fmt: skip
def _linear(x: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None,
            residual: Tensor | None = None, mul: Tensor | None = None) -> Tensor:  # fmt: skip
    return api.dispatcher().call(LINEAR, x, weight, bias, activation, residual, mul)


@_linear.register_fake
def _(x: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None, residual: Tensor | None = None,
      mul: Tensor | None = None) -> Tensor:  # fmt: skip
    _, swiglu = gemm_fe.parse_linear_activation(activation)
    call = Call(Op.LINEAR, x, weight, c=residual, bias=bias, mul=mul, swiglu=swiglu)
    return _empty_like_meta(_validated(gemm_fe.expected_result, call), x.device)


# ---- gemm -------------------------------------------------------------------------------------
@_define("gemm", "(Tensor a, Tensor b, Tensor? c, float alpha, float beta) -> Tensor")
def _gemm(a: Tensor, b: Tensor, c: Tensor | None, alpha: float, beta: float) -> Tensor:
    return api.dispatcher().call(GEMM, a, b, c, alpha, beta, None)


@_gemm.register_fake
def _(a: Tensor, b: Tensor, c: Tensor | None, alpha: float, beta: float) -> Tensor:
    return _empty_like_meta(_validated(gemm_fe.expected_result, Call(Op.GEMM, a, b, c=c)), a.device)


@_define("gemm_out", "(Tensor a, Tensor b, Tensor? c, float alpha, float beta, Tensor(a!) out) -> ()",
         mutates=("out",))  # fmt: skip
def _gemm_out(a: Tensor, b: Tensor, c: Tensor | None, alpha: float, beta: float, out: Tensor) -> None:
    api.dispatcher().call(GEMM, a, b, c, alpha, beta, out)


@_gemm_out.register_fake
def _(a: Tensor, b: Tensor, c: Tensor | None, alpha: float, beta: float, out: Tensor) -> None:
    _validated(gemm_fe.expected_result, Call(Op.GEMM, a, b, c=c, out=out))


# ---- scaled_mm --------------------------------------------------------------------------------
_SCALED_ARGS = ("Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor? bias, Tensor? scale_result, "
                "ScalarType? out_dtype, bool use_fast_accum, str? activation")  # fmt: skip


def _scaled_call(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, bias: Tensor | None,
                 scale_result: Tensor | None, out_dtype: torch.dtype | None, use_fast_accum: bool,
                 out: Tensor | None) -> Call:  # fmt: skip
    return Call(Op.SCALED_MM, a, b, bias=bias, out=out, scale_a=scale_a, scale_b=scale_b,
                scale_result=scale_result, out_dtype=out_dtype, fast_accum=use_fast_accum)  # fmt: skip


@_define("scaled_mm", f"({_SCALED_ARGS}) -> Tensor")
def _scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, bias: Tensor | None,
               scale_result: Tensor | None, out_dtype: torch.dtype | None, use_fast_accum: bool,
               activation: str | None) -> Tensor:  # fmt: skip
    return api.dispatcher().call(SCALED_MM, a, b, scale_a, scale_b, bias, out_dtype, None, activation, use_fast_accum,
                                 scale_result)  # fmt: skip


@_scaled_mm.register_fake
def _(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, bias: Tensor | None, scale_result: Tensor | None,
      out_dtype: torch.dtype | None, use_fast_accum: bool, activation: str | None) -> Tensor:  # fmt: skip
    gemm_fe.parse_activation(activation)
    r = _validated(gemm_fe.expected_result, _scaled_call(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, None))
    return _empty_like_meta(r, a.device)


@_define("scaled_mm_out", f"({_SCALED_ARGS}, Tensor(a!) out) -> ()", mutates=("out",))
def _scaled_mm_out(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, bias: Tensor | None,
                   scale_result: Tensor | None, out_dtype: torch.dtype | None, use_fast_accum: bool,
                   activation: str | None, out: Tensor) -> None:  # fmt: skip
    api.dispatcher().call(SCALED_MM, a, b, scale_a, scale_b, bias, out_dtype, out, activation, use_fast_accum,
                          scale_result)  # fmt: skip


@_scaled_mm_out.register_fake
def _(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, bias: Tensor | None, scale_result: Tensor | None,
      out_dtype: torch.dtype | None, use_fast_accum: bool, activation: str | None, out: Tensor) -> None:  # fmt: skip
    gemm_fe.parse_activation(activation)
    _validated(gemm_fe.expected_result, _scaled_call(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, out))


# ---- conv2d -----------------------------------------------------------------------------------
def _conv_padding_arg(padding: Sequence[int], padding_mode: str | None) -> Any:
    return padding_mode if padding_mode is not None else tuple(padding)


def conv2d_output_format(x: Tensor, weight: Tensor) -> torch.memory_format:
    """The layout of ``conv2d``'s output: channels_last when x or the weight is (as ``F.conv2d``
    chooses on CPU and CUDA, and as the served pointwise convs write), else contiguous."""
    return _CL if conv_fe.suggests_channels_last(x) or conv_fe.suggests_channels_last(weight) else torch.contiguous_format


def _conv2d_impl(x: Tensor, weight: Tensor, bias: Tensor | None, stride: list[int], padding: list[int],
                 padding_mode: str | None, dilation: list[int], groups: int, activation: str | None,
                 residual: Tensor | None) -> Tensor:  # fmt: skip
    """The body of ``torch.ops.autocutlass.conv2d`` (also run directly by the eager autograd path)."""
    y = api.dispatcher().call(CONV2D, x, weight, bias, tuple(stride), _conv_padding_arg(padding, padding_mode),
                              tuple(dilation), groups, activation, residual)  # fmt: skip
    fmt = conv2d_output_format(x, weight)
    return y if y.is_contiguous(memory_format=fmt) else y.contiguous(memory_format=fmt)


_conv2d = _define("conv2d", "(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, str? padding_mode, "
                            "int[] dilation, int groups, str? activation, Tensor? residual) -> Tensor")(_conv2d_impl)  # fmt: skip


@_conv2d.register_fake
def _(x: Tensor, weight: Tensor, bias: Tensor | None, stride: list[int], padding: list[int], padding_mode: str | None,
      dilation: list[int], groups: int, activation: str | None, residual: Tensor | None) -> Tensor:  # fmt: skip
    call = CONV2D.make_call(x, weight, bias, tuple(stride), _conv_padding_arg(padding, padding_mode), tuple(dilation),
                            groups, activation, residual)  # fmt: skip
    y = _validated(conv_fe.expected_output, call)
    return torch.empty(y.shape, dtype=y.dtype, device=x.device, memory_format=conv2d_output_format(x, weight))


# ---- grouped_mm -------------------------------------------------------------------------------
@_define("grouped_mm", "(Tensor x, Tensor w, Tensor? offs, Tensor? bias, ScalarType? out_dtype, str? activation) "
                       "-> Tensor")  # fmt: skip
def _grouped_mm(x: Tensor, w: Tensor, offs: Tensor | None, bias: Tensor | None, out_dtype: torch.dtype | None,
                activation: str | None) -> Tensor:  # fmt: skip
    return api.dispatcher().call(GROUPED_MM, x, w, offs, bias, out_dtype, activation)


@_grouped_mm.register_fake
def _(x: Tensor, w: Tensor, offs: Tensor | None, bias: Tensor | None, out_dtype: torch.dtype | None,
      activation: str | None) -> Tensor:  # fmt: skip
    gemm_fe.parse_activation(activation)
    r = _validated(grouped_fe.expected_output, GroupedCall(x, w, offs, bias, out_dtype))
    return _empty_like_meta(r, x.device)


# ---- conv2d backward: dgrad and wgrad ---------------------------------------------------------
_GRAD_ARGS = "int[] stride, int[] padding, int[] dilation, int groups"


def _grad_result(y: Tensor, dy: Tensor, other: Tensor) -> Tensor:
    fmt = grad_output_format(dy, other)
    return y if y.is_contiguous(memory_format=fmt) else y.contiguous(memory_format=fmt)


def _grad_fake(fe: Any, dy: Tensor, other: Tensor, size: Sequence[Any], stride: Sequence[int],
               padding: Sequence[int], dilation: Sequence[int], groups: int) -> Tensor:  # fmt: skip
    call = fe.make_call(dy, other, size, stride, padding, dilation, groups) if all(
        isinstance(i, int) for i in size) else None  # symbolic sizes: validated when the graph runs
    if call is not None:
        _validated(fe.expected, call)
    return torch.empty(list(size), dtype=dy.dtype, device=dy.device, memory_format=grad_output_format(dy, other))


def _conv2d_dgrad_impl(grad_output: Tensor, weight: Tensor, input_size: list[int], stride: list[int],
                       padding: list[int], dilation: list[int], groups: int) -> Tensor:  # fmt: skip
    """The body of ``torch.ops.autocutlass.conv2d_dgrad`` (also run directly by the eager autograd path)."""
    y = api.dispatcher().call(CONV2D_DGRAD, grad_output, weight, input_size, stride, padding, dilation, groups)
    return _grad_result(y, grad_output, weight)


_conv2d_dgrad = _define("conv2d_dgrad", f"(Tensor grad_output, Tensor weight, SymInt[] input_size, {_GRAD_ARGS}) "
                                        "-> Tensor")(_conv2d_dgrad_impl)  # fmt: skip


@_conv2d_dgrad.register_fake
def _(grad_output: Tensor, weight: Tensor, input_size: list[Any], stride: list[int], padding: list[int],
      dilation: list[int], groups: int) -> Tensor:  # fmt: skip
    return _grad_fake(CONV2D_DGRAD, grad_output, weight, input_size, stride, padding, dilation, groups)


def _conv2d_wgrad_impl(grad_output: Tensor, input: Tensor, weight_size: list[int], stride: list[int],
                       padding: list[int], dilation: list[int], groups: int) -> Tensor:  # fmt: skip
    """The body of ``torch.ops.autocutlass.conv2d_wgrad`` (also run directly by the eager autograd path)."""
    y = api.dispatcher().call(CONV2D_WGRAD, grad_output, input, weight_size, stride, padding, dilation, groups)
    return _grad_result(y, grad_output, input)


_conv2d_wgrad = _define("conv2d_wgrad", f"(Tensor grad_output, Tensor input, SymInt[] weight_size, {_GRAD_ARGS}) "
                                        "-> Tensor")(_conv2d_wgrad_impl)  # fmt: skip


@_conv2d_wgrad.register_fake
def _(grad_output: Tensor, input: Tensor, weight_size: list[Any], stride: list[int], padding: list[int],
      dilation: list[int], groups: int) -> Tensor:  # fmt: skip
    return _grad_fake(CONV2D_WGRAD, grad_output, input, weight_size, stride, padding, dilation, groups)


# ---- autograd ---------------------------------------------------------------------------------
def _product(a: Tensor, b: Tensor, alpha: float = 1.0) -> Tensor:
    """``alpha * a @ b`` by our own ops (``matmul``, or ``gemm`` to scale in the epilogue)."""
    if alpha == 1.0:
        return torch.ops.autocutlass.matmul(a, b)
    return torch.ops.autocutlass.gemm(a, b, None, alpha, 0.0)


def matmul_grads(dy: Tensor, a: Tensor, b: Tensor, need_a: bool, need_b: bool, alpha: float = 1.0
                 ) -> tuple[Tensor | None, Tensor | None]:  # fmt: skip
    """(dA, dB) of Y = alpha * torch.matmul(A, B) for any ranks torch.matmul takes."""
    a2 = a.unsqueeze(0) if a.dim() == 1 else a  # torch.matmul's own promotion of 1-D operands
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    g = dy.unsqueeze(-1) if b.dim() == 1 else dy
    g = g.unsqueeze(-2) if a.dim() == 1 else g
    da = db = None
    if need_a:
        da = _product(g, b2.mT, alpha)
        if da.shape != a2.shape:
            da = da.sum_to_size(a2.shape)
        da = da.reshape(a.shape)
    if need_b:
        if b2.dim() == 2 and a2.dim() > 2:  # the batch of A (and of dY) folds into the reduction
            db = _product(a2.reshape(-1, a2.shape[-1]).mT, g.reshape(-1, g.shape[-1]), alpha)
        else:
            db = _product(a2.mT, g, alpha)
            if db.shape != b2.shape:
                db = db.sum_to_size(b2.shape)
        db = db.reshape(b.shape)
    return da, db


def _matmul_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    a, b = inputs
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, Tensor | None]:
    a, b = ctx.saved_tensors
    return matmul_grads(dy, a, b, ctx.needs_input_grad[0], ctx.needs_input_grad[1])


def _gemm_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    a, b, c, alpha, beta = inputs
    ctx.save_for_backward(a, b)
    ctx.alpha, ctx.beta = float(alpha), float(beta)
    ctx.c_shape = None if c is None else c.shape


def _gemm_backward(ctx: Any, dy: Tensor) -> tuple[Any, ...]:
    a, b = ctx.saved_tensors
    need = ctx.needs_input_grad
    da, db = matmul_grads(dy, a, b, need[0], need[1], ctx.alpha)
    dc = None
    if need[2] and ctx.beta != 0.0:
        dc = dy if ctx.beta == 1.0 else dy * ctx.beta
        if dc.shape != ctx.c_shape:
            dc = dc.sum_to_size(ctx.c_shape)
    return da, db, dc, None, None


def activation_backward(dy: Tensor, z: Tensor, act: Activation) -> Tensor:
    """d act(z) / dz times dy (aten's activation backward kernels, silu's by formula)."""
    if act is Activation.RELU:
        return torch.ops.aten.threshold_backward(dy, z, 0)
    if act is Activation.SILU:  # by formula: aten.silu_backward has no derivative (double backward)
        s = torch.sigmoid(z)
        return dy * s * (1 + z * (1 - s))
    if act is Activation.GELU:
        return torch.ops.aten.gelu_backward(dy, z, approximate="none")
    if act is Activation.GELU_TANH:
        return torch.ops.aten.gelu_backward(dy, z, approximate="tanh")
    return dy


def apply_activation(y: Tensor, act: Activation) -> Tensor:
    """``act(y)`` out of place, with torch (so autograd records it)."""
    if act is Activation.RELU:
        return torch.relu(y)
    if act is Activation.SILU:
        return F.silu(y)
    if act is Activation.GELU:
        return F.gelu(y)
    if act is Activation.GELU_TANH:
        return F.gelu(y, approximate="tanh")
    return y


def _linear_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    x, w, bias, activation, *rest = inputs
    residual = rest[0] if rest else None
    mul = rest[1] if len(rest) > 1 else None
    ctx.act, ctx.swiglu = gemm_fe.parse_linear_activation(activation)
    # the pre-activation Z = X W^T + b + residual, recomputed for act' and for A = act(Z), which a mul's
    # gradient needs (Y = A * mul)
    recompute = ctx.act is not Activation.NONE or mul is not None
    ctx.save_for_backward(x, w, bias if recompute else None, residual if recompute else None, mul)
    ctx.bias_shape = None if bias is None else bias.shape
    ctx.residual_shape = None if residual is None else residual.shape


def linear_grads(dz: Tensor, x: Tensor, w: Tensor, bias_shape: Any, need: Sequence[bool]) -> tuple[Any, Any, Any]:
    """(dX, dW, db) of Z = F.linear(X, W, b)."""
    if w.dim() != 2:  # F.linear's 1-D weight: Z = X @ w (+ b)
        dx, dw = matmul_grads(dz, x, w, need[0], need[1])
        db = dz.sum_to_size(bias_shape) if need[2] and bias_shape is not None else None
        return dx, dw, db
    n, k = w.shape
    g = dz.reshape(-1, n)  # (M, N): a view when dZ's rows merge, else one copy (then every GEMM is served)
    dx = _product(g, w).reshape(*dz.shape[:-1], k) if need[0] else None
    dw = _product(g.mT, x.reshape(-1, k)) if need[1] else None
    db = g.sum(0).sum_to_size(bias_shape) if need[2] and bias_shape is not None else None
    return dx, dw, db


def swiglu_backward(dy: Tensor, z: Tensor) -> Tensor:
    """dZ of Y = silu(G) * U with Z = [G, U] along the last dimension."""
    g, u = z.chunk(2, dim=-1)
    s = torch.sigmoid(g)
    return torch.cat([dy * u * s * (1 + g * (1 - s)), dy * (g * s)], dim=-1)


def _linear_backward(ctx: Any, dy: Tensor) -> tuple[Any, ...]:
    x, w, bias, residual, mul = ctx.saved_tensors
    need = ctx.needs_input_grad
    if ctx.swiglu:  # the op was called with SwiGLU fused (no residual, no mul): recompute Z (M, 2N)
        dz = swiglu_backward(dy, torch.ops.autocutlass.linear(x, w, bias, None))
        dx, dw, db = linear_grads(dz, x, w, ctx.bias_shape, need)
        return dx, dw, db, None, None, None
    dmul = None
    if mul is not None:  # Y = A * mul, A = act(Z): dA = dY * mul, dmul = dY * A
        if len(need) > 5 and need[5]:
            a = torch.ops.autocutlass.linear(x, w, bias, None if ctx.act is Activation.NONE else ctx.act.value, residual)
            dmul = (dy * a).sum_to_size(mul.shape)
        dy = (dy * mul).sum_to_size(dy.shape)
    dz = dy
    if ctx.act is not Activation.NONE:  # the op was called with its activation fused: recompute Z
        dz = activation_backward(dy, torch.ops.autocutlass.linear(x, w, bias, None, residual), ctx.act)
    dx, dw, db = linear_grads(dz, x, w, ctx.bias_shape, need)
    shape = ctx.residual_shape
    dres = dz.sum_to_size(shape) if len(need) > 4 and need[4] and shape is not None else None
    return dx, dw, db, None, dres, dmul


def _same_pads(weight: Tensor, dilation: Sequence[int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(left, right) padding per spatial axis of padding='same' (the extra one on the right, as torch)."""
    pads = []
    for i in range(2):
        total = dilation[i] * (weight.shape[2 + i] - 1)
        pads.append((total // 2, total - total // 2))
    return pads[0], pads[1]


def _conv_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    x, w, bias, stride, padding, padding_mode, dilation, groups, activation, residual = inputs
    ctx.act = gemm_fe.parse_activation(activation)
    recompute = ctx.act is not Activation.NONE
    ctx.save_for_backward(x, w, bias if recompute else None, residual if recompute else None)
    ctx.bias_shape = None if bias is None else bias.shape
    ctx.conv = (list(stride), list(padding), padding_mode, list(dilation), groups)


class GradEntries:
    """One conv2d call site's backward entries (dgrad, wgrad) as its last eager backward resolved
    them, kept for the next backward of the site whose dZ and dispatcher state match: that
    backward runs them without building their memo keys. Made per ``autocutlass.nn.Conv2d``
    forward signature (``autocutlass.nn.conv_site``)."""

    __slots__ = ("state", "ours_margin")

    def __init__(self) -> None:
        self.state: tuple[Any, ...] | None = None
        """(key, dgrad entry, wgrad entry): one tuple, swapped whole, so that a thread never reads
        one backward's entries with another's key."""
        self.ours_margin = math.inf
        """What the kept entries of our kernels save against torch's per backward, in ms: the sum
        of their vendor margins (``ours_margin``); 0 where torch computes the backward in one
        ``aten.convolution_backward`` (``torch_computes_backward``: our dgrad beside torch's wgrad
        included); infinite while nothing is kept. Set with ``state`` (``keep``)."""

    def keep(self, state: tuple[Any, ...] | None) -> None:
        """Keep ``state`` (``(key, dgrad entry, wgrad entry)``, or None: nothing kept)."""
        if state is None:
            self.ours_margin = math.inf
        else:
            self.ours_margin = 0.0 if torch_computes_backward(state[1], state[2]) else ours_margin(state[1], state[2])
        self.state = state


def ours_margin(*entries: Callable[..., Any] | None) -> float:
    """The summed vendor margins (``dispatch.vendor_margin_of``, ms) of the dispatcher entries that
    run our kernels (None: not wanted; a torch-served entry counts 0, one of ours without a margin
    makes the sum infinite): what they save per call against torch's."""
    total = 0.0
    for e in entries:
        if e is not None and torch_served(e) is None:
            m = vendor_margin_of(e)
            total += math.inf if m is None else m
    return total


def torch_computes_backward(dgrad: Callable[..., Any] | None, wgrad: Callable[..., Any] | None) -> bool:
    """Whether one ``aten.convolution_backward`` computes a conv backward whose wanted directions'
    entries are these (None: not wanted): torch serves the wgrad, or every wanted direction."""
    if wgrad is not None and torch_served(wgrad) is not None:
        return True
    return all(torch_served(e) is not None for e in (dgrad, wgrad) if e is not None)


def conv2d_grads(dz: Tensor, x: Tensor, w: Tensor, bias_shape: Any, conv: tuple[Any, ...], need: Sequence[bool],
                 direct: bool = False, grads: GradEntries | None = None) -> tuple[Any, Any, Any]:  # fmt: skip
    """(dX, dW, db) of Z = F.conv2d(X, W, b, ...): dX by ``conv2d_dgrad``, dW by ``conv2d_wgrad``
    (each an autocutlass op: fingerprinted as its own conv2d direction, served by our kernels or
    by ``aten.convolution_backward``), db = dZ summed over N, H, W. A channels_last forward's dZ
    is made channels_last first (one copy only when it is not: e.g. the expanded ones of
    ``y.sum().backward()``), so that the kernels can read it. ``direct``: the two ops' bodies are
    called as functions (the eager autograd path, grad mode off: nothing records them); there, when
    torch serves every wanted direction, one ``aten.convolution_backward`` computes the wanted
    gradients together (``_torch_merged``). ``grads``: a call site's kept backward entries (used and
    refreshed on the direct path)."""
    stride, padding, padding_mode, dilation, groups = conv
    unbatched = x.dim() == 3
    if unbatched:  # F.conv2d's unbatched (C, H, W) input: the ops take 4-D tensors
        x, dz = x.unsqueeze(0), dz.unsqueeze(0)
    if padding_mode == "valid":
        padding = [0, 0]
    crop = None
    if padding_mode == "same":
        (lh, rh), (lw, rw) = _same_pads(w, dilation)
        if lh == rh and lw == rw:
            padding = [lh, lw]
        else:  # torch pads unevenly by padding the input first; so does its backward here
            crop = (lh, lw, x.shape[-2], x.shape[-1])
            x = F.pad(x, (lw, rw, lh, rh))
            padding = [0, 0]
    if conv2d_output_format(x, w) is _CL and not dz.is_contiguous(memory_format=_CL):
        dz = dz.contiguous(memory_format=_CL)
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    want_b = bool(need[2]) and bias_shape is not None
    if direct and (need[0] or need[1]):
        dx, dw, db = _torch_merged(dz, x, w, (bool(need[0]), bool(need[1]), want_b), stride, padding, dilation,
                                   groups, grads)  # fmt: skip
        if db is not None:
            db = db.sum_to_size(bias_shape)
    else:
        dgrad = _conv2d_dgrad_impl if direct else torch.ops.autocutlass.conv2d_dgrad
        wgrad = _conv2d_wgrad_impl if direct else torch.ops.autocutlass.conv2d_wgrad
        dx = dgrad(dz, w, list(x.shape), stride, padding, dilation, groups) if need[0] else None
        dw = wgrad(dz, x, list(w.shape), stride, padding, dilation, groups) if need[1] else None
        db = dz.sum((0, 2, 3)).sum_to_size(bias_shape) if want_b else None
    if dx is not None:
        if crop is not None:
            top, left, h, wd = crop
            dx = dx[..., top : top + h, left : left + wd]
        if unbatched:
            dx = dx.squeeze(0)
    return dx, dw, db


def _torch_merged(dz: Tensor, x: Tensor, w: Tensor, want: tuple[bool, bool, bool], stride: list[int],
                  padding: list[int], dilation: list[int], groups: int,
                  grads: GradEntries | None = None) -> tuple[Any, Any, Any]:  # fmt: skip
    """The eager backward's wanted gradients (``want``: dX, dW, db), None for those not wanted. The
    directions the dispatcher serves with torch (fallbacks, vendor verdicts, policy ``off``) are
    computed together by one ``aten.convolution_backward`` on the real X and W, as torch's own conv
    backward does, db with them (one op instead of one per direction, each with a stand-in
    operand, plus a bias reduction), the directions' calls counted as if run (``stats()``); the
    others run their dispatcher entries as the ops' bodies would (``_conv2d_dgrad_impl``,
    ``_conv2d_wgrad_impl``, without a second lookup), db then a sum of dZ when torch computes no
    direction. Results in the layouts the ops give. With ``grads`` (a call site's kept entries),
    entries kept for a dZ of the same metadata under the same dispatcher, epoch and policy run
    without a lookup (counted as memo hits); otherwise they are looked up and kept there when both
    are memoised."""
    d = api.dispatcher()
    key = None
    if grads is not None:
        key = (d, d.epoch, POLICY_OVERRIDE.policy or d._policy, want[0], want[1], dz.shape, dz.stride(), dz.dtype,
               dz.get_device(), dz.data_ptr() & 15, torch.backends.cudnn.benchmark)  # fmt: skip
    kept = None if grads is None else grads.state
    gx = [list(x.shape), stride, padding, dilation, groups]
    gw = [list(w.shape), stride, padding, dilation, groups]
    if kept is not None and kept[0] == key:
        ex, ew = kept[1], kept[2]
        d._n.memo_hits += (ex is not None) + (ew is not None)
    else:
        ex = d.entry(CONV2D_DGRAD, dz, w, *gx) if want[0] else None
        ew = d.entry(CONV2D_WGRAD, dz, x, *gw) if want[1] else None
        if grads is not None:
            memoised = ((ex is None or d.memoised(CONV2D_DGRAD, dz, w, *gx) is ex)
                        and (ew is None or d.memoised(CONV2D_WGRAD, dz, x, *gw) is ew))  # fmt: skip
            grads.keep((key, ex, ew) if memoised else None)
    cx = None if ex is None else torch_served(ex)
    cw = None if ew is None else torch_served(ew)
    mask = [cx is not None, cw is not None, want[2]]
    dx = dw = db = None
    if mask[0] or mask[1]:
        for count in (cx, cw):
            if count is not None:
                count()
        tx, tw, tb = torch.ops.aten.convolution_backward(dz, x, w, [w.shape[0]] if want[2] else None, stride, padding,
                                                         dilation, False, [0, 0], groups, mask)  # fmt: skip
        dx = _grad_result(tx, dz, w) if mask[0] else None
        dw = _grad_result(tw, dz, x) if mask[1] else None
        db = tb if want[2] else None
    elif want[2]:
        db = dz.sum((0, 2, 3))
    if ex is not None and cx is None:
        dx = _grad_result(ex(dz, w, *gx), dz, w)
    if ew is not None and cw is None:
        dw = _grad_result(ew(dz, x, *gw), dz, x)
    return dx, dw, db


def _conv_backward(ctx: Any, dy: Tensor, direct: bool = False) -> tuple[Any, ...]:
    x, w, bias, residual = ctx.saved_tensors
    need = ctx.needs_input_grad
    dz = dy
    if ctx.act is not Activation.NONE:  # fused activation: recompute the pre-activation
        stride, padding, padding_mode, dilation, groups = ctx.conv
        conv = _conv2d_impl if direct else torch.ops.autocutlass.conv2d
        z = conv(x, w, bias, stride, padding, padding_mode, dilation, groups, None, residual)
        dz = activation_backward(dy, z, ctx.act)
    dx, dw, db = conv2d_grads(dz, x, w, ctx.bias_shape, ctx.conv, (need[0], need[1], need[2]), direct)
    dres = dz if need[9] else None
    return dx, dw, db, None, None, None, None, None, None, dres


class _EagerConv2d(torch.autograd.Function):
    """conv2d under eager autograd without the custom-op machinery (``torch.library``'s autograd
    wrapper, redispatch and default filling cost tens of microseconds of host time per call, which a
    convnet's training step pays three times per layer): the op's own body forward, the op's
    ``_conv_setup`` and ``_conv_backward``, the backward's dgrad and wgrad run as functions unless the
    backward itself records (``create_graph``: then through the ops, so that double backward works).
    Used only outside torch.compile, autocast, functorch transforms and any torch dispatch mode
    (``eager_autograd``)."""

    @staticmethod
    def forward(ctx: Any, *inputs: Any) -> Tensor:  # type: ignore[override]
        # ctx-style (no separate setup_context): Function.apply then skips binding the arguments
        # through inspect.signature, which costs as much as the rest of the call
        y = _conv2d_impl(*inputs)
        _conv_setup(ctx, inputs, y)
        return y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        return _conv_backward(ctx, dy, direct=not torch.is_grad_enabled())


def eager_autograd(*tensors: Tensor | None) -> bool:
    """The eager autograd path applies: not compiling, autocast off, no torch dispatch mode active
    (fake tensors, tracing), no functorch transform, no torch.jit trace, and only plain tensors and
    parameters (no tensor subclass)."""
    return (not torch.compiler.is_compiling() and not torch._C._is_any_autocast_enabled()
            and torch._C._len_torch_dispatch_stack() == 0 and not torch._C._are_functorch_transforms_active()
            and torch._C._get_tracing_state() is None
            and all(t is None or type(t) in _PLAIN for t in tensors))  # fmt: skip


_PLAIN = (Tensor, torch.nn.Parameter)


def _rows_aligned(t: Tensor) -> Tensor:
    """``t`` (.., R, C) row-major, or a copy whose row stride is padded to a 16-byte multiple (the
    rule ``torch._grouped_mm`` and TMA share), as a view of the same shape."""
    if t.numel() == 0:  # contiguous() keeps an empty expanded tensor's 0 strides
        return t.new_zeros(t.shape)
    t = t.contiguous()
    align = 16 // t.element_size()
    c = t.shape[-1]
    if c % align == 0:
        return t
    buf = t.new_zeros((*t.shape[:-1], -(-c // align) * align))
    buf[..., :c] = t
    return buf[..., :c]


def _operand(t: Tensor) -> Tensor:
    """A matrix as a grouped_mm operand: any view torch accepts, else a row-major copy."""
    try:
        grouped_fe._check_strides("operand", t)
    except RuntimeError:
        return _rows_aligned(t)
    return t


def grouped_mm_grads(dz: Tensor, x: Tensor, w: Tensor, offs: Tensor | None, has_bias: bool,
                     need: Sequence[bool]) -> tuple[Any, Any, Any]:  # fmt: skip
    """(dX, dW, dbias) of Z = grouped_mm(x, w, offs) + bias[group], each GEMM a grouped_mm call
    (see the module docstring)."""
    form = grouped_fe.form_of(x, w)
    g = _rows_aligned(dz.to(x.dtype))
    gm = torch.ops.autocutlass.grouped_mm
    dx = dw = db = None
    groups = None if form is Form.BATCHED else offs
    if need[0]:
        dx = gm(g, _operand(w.transpose(-2, -1)), groups, None, None, None)
    if need[1]:
        dw = gm(_operand(x.transpose(-2, -1)), g, groups, None, None, None)
    if has_bias and need[3]:
        if form is Form.M_GROUPED:
            assert offs is not None
            e, n = w.shape[0], dz.shape[-1]
            acc = dz.new_zeros((e + 1, n), dtype=torch.float32)
            db = acc.index_add_(0, grouped_fe.group_rows(offs, dz.shape[0]), dz.float())[:e].to(dz.dtype)
        else:
            db = dz.sum(1)
    return dx, dw, db


def _grouped_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    x, w, offs, bias, out_dtype, activation = inputs
    ctx.act = gemm_fe.parse_activation(activation)
    recompute = ctx.act is not Activation.NONE
    ctx.save_for_backward(x, w, offs, bias if recompute else None)
    ctx.has_bias = bias is not None
    ctx.out_dtype = out_dtype


def _grouped_backward(ctx: Any, dy: Tensor) -> tuple[Any, ...]:
    x, w, offs, bias = ctx.saved_tensors
    dz = dy
    if ctx.act is not Activation.NONE:  # the op was called with its activation fused: recompute Z
        z = torch.ops.autocutlass.grouped_mm(x, w, offs, bias, ctx.out_dtype, None)
        dz = activation_backward(dy, z, ctx.act)
    need = ctx.needs_input_grad
    dx, dw, db = grouped_mm_grads(dz, x, w, offs, ctx.has_bias, need)
    return dx, dw, None, db, None, None


def _dgrad_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    dy, w, _size, stride, padding, dilation, groups = inputs
    ctx.save_for_backward(dy, w)
    ctx.geometry = (list(stride), list(padding), list(dilation), groups)


def _dgrad_backward(ctx: Any, g: Tensor) -> tuple[Any, ...]:
    """dX = dgrad(dY, W) is bilinear: <G, dX> = <conv(G, W), dY>, so d/d(dY) = conv(G, W) and
    d/dW = wgrad(dY, G) (double backward through our own ops)."""
    dy, w = ctx.saved_tensors
    stride, padding, dilation, groups = ctx.geometry
    need = ctx.needs_input_grad
    if need[0] or need[1]:
        g = g.contiguous(memory_format=_CL) if conv2d_output_format(dy, w) is _CL else g
    ddy = torch.ops.autocutlass.conv2d(g, w, None, stride, padding, None, dilation, groups, None, None) if need[0] else None
    dw = torch.ops.autocutlass.conv2d_wgrad(dy, g, list(w.shape), stride, padding, dilation, groups) if need[1] else None
    return ddy, dw, None, None, None, None, None


def _wgrad_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    dy, x, _size, stride, padding, dilation, groups = inputs
    ctx.save_for_backward(dy, x)
    ctx.geometry = (list(stride), list(padding), list(dilation), groups)


def _wgrad_backward(ctx: Any, g: Tensor) -> tuple[Any, ...]:
    """dW = wgrad(dY, X) is bilinear: <G, dW> = <conv(X, G), dY>, so d/d(dY) = conv(X, G) and
    d/dX = dgrad(dY, G)."""
    dy, x = ctx.saved_tensors
    stride, padding, dilation, groups = ctx.geometry
    need = ctx.needs_input_grad
    if need[0] or need[1]:
        g = g.contiguous(memory_format=_CL) if conv2d_output_format(dy, x) is _CL else g
    ddy = torch.ops.autocutlass.conv2d(x, g, None, stride, padding, None, dilation, groups, None, None) if need[0] else None
    dx = torch.ops.autocutlass.conv2d_dgrad(dy, g, list(x.shape), stride, padding, dilation, groups) if need[1] else None
    return ddy, dx, None, None, None, None, None


_matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)
_linear.register_autograd(_linear_backward, setup_context=_linear_setup)
_gemm.register_autograd(_gemm_backward, setup_context=_gemm_setup)
_conv2d.register_autograd(_conv_backward, setup_context=_conv_setup)
_grouped_mm.register_autograd(_grouped_backward, setup_context=_grouped_setup)
_conv2d_dgrad.register_autograd(_dgrad_backward, setup_context=_dgrad_setup)
_conv2d_wgrad.register_autograd(_wgrad_backward, setup_context=_wgrad_setup)


# ---- autocast ---------------------------------------------------------------------------------
_AUTOCAST_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")
"""Holds the Autocast kernels (the custom ops hold their own registrations)."""


def _cast(value: Any, device_type: str, dtype: torch.dtype) -> Any:
    if isinstance(value, Tensor) and value.is_floating_point() and value.device.type == device_type \
            and value.dtype is not torch.float64:  # fmt: skip
        return value.to(dtype)
    return value


def _register_autocast(name: str, device_type: str) -> None:
    key = "Autocast" + torch._C._dispatch_key_for_device(device_type)
    keyset = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))
    op = getattr(torch.ops.autocutlass, name).default

    def kernel(_keys: Any, *args: Any) -> Any:
        dtype = torch.get_autocast_dtype(device_type)  # the dtype of the autocast region now
        with torch._C._ExcludeDispatchKeyGuard(keyset):
            return op(*(_cast(a, device_type, dtype) for a in args))

    _AUTOCAST_LIB.impl(name, kernel, key, with_keyset=True)


for _name in ("matmul", "linear", "gemm", "conv2d"):
    for _device in ("cpu", "cuda"):
        _register_autocast(_name, _device)


# ---- the graph path: what the public entry points call under autograd, autocast and compile ----
def _require_tensors(op: str, **tensors: Any) -> None:
    """The ``TypeError`` the eager entry point raises for an argument that is not a tensor."""
    for name, t in tensors.items():
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"autocutlass.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")


_ACTIVATIONS = {a.value: a for a in Activation}


def _activation(activation: Any) -> Activation | None:
    """The activation by a dict lookup, or None for an unknown name, which the caller hands to the
    op to reject: its fake kernel (or, eagerly, the dispatcher) raises the eager ``ValueError``.
    (A ``ValueError`` raised in traced code makes Dynamo re-run the entry point eagerly under its
    frame hook, where tracing the front-end's enum lookup fails inside Dynamo instead.) Anything
    but None or a string is rejected here with the eager error."""
    if activation is None:
        return Activation.NONE
    if isinstance(activation, str):
        return _ACTIVATIONS.get(activation)
    choices = ", ".join(repr(x.value) for x in Activation if x is not Activation.NONE)
    raise ValueError(f"activation={activation!r} is not one of None, {choices}")


def _records(*tensors: Tensor | None) -> bool:
    """Autograd would record a call on ``tensors``."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def matmul(a: Tensor, b: Tensor, out: Tensor | None) -> Tensor:
    """``autocutlass.matmul`` through ``torch.ops.autocutlass.matmul`` (or ``matmul_out``)."""
    _require_tensors("matmul", a=a, b=b, out=out)
    if out is None:
        return torch.ops.autocutlass.matmul(a, b)
    torch.ops.autocutlass.matmul_out(a, b, out)
    return out


def linear(x: Tensor, weight: Tensor, bias: Tensor | None, activation: Any, residual: Tensor | None = None,
           mul: Tensor | None = None) -> Tensor:  # fmt: skip
    """``autocutlass.linear`` through ``torch.ops.autocutlass.linear``; when autograd records, the
    activation and the mul run outside the kernel (see the module docstring), the residual stays
    in it."""
    _require_tensors("linear", x=x, weight=weight, bias=bias, residual=residual, mul=mul)
    if (mul is not None or activation == gemm_fe.SWIGLU) and torch.is_autocast_enabled(x.device.type):
        # what runs outside the op (the checks, the product with mul) sees the operands as the op's
        # Autocast kernel casts them, so that the result has the autocast dtype as F.linear's would
        dtype = torch.get_autocast_dtype(x.device.type)
        x, weight, bias, residual, mul = (_cast(t, x.device.type, dtype) for t in (x, weight, bias, residual, mul))
    if isinstance(activation, str) and activation == gemm_fe.SWIGLU:
        if _records(x, weight, bias, residual, mul):  # the (M, 2N) product through the op, SwiGLU in torch
            gemm_fe.expected_result(Call(Op.LINEAR, x, weight, c=residual, bias=bias, mul=mul, swiglu=True))
            return gemm_fe.swiglu(torch.ops.autocutlass.linear(x, weight, bias, None))
        return torch.ops.autocutlass.linear(x, weight, bias, activation, residual, mul)
    act = _activation(activation)
    if act is None:  # unknown: the op raises the eager error
        return torch.ops.autocutlass.linear(x, weight, bias, activation, residual, mul)
    if (act is not Activation.NONE or mul is not None) and _records(x, weight, bias, residual, mul):
        if mul is not None:  # validated as the op would (a mul that does not broadcast to the result raises)
            gemm_fe.expected_result(Call(Op.LINEAR, x, weight, c=residual, bias=bias, mul=mul))
            return apply_activation(torch.ops.autocutlass.linear(x, weight, bias, None, residual), act) * mul
        return apply_activation(torch.ops.autocutlass.linear(x, weight, bias, None, residual), act)
    return torch.ops.autocutlass.linear(x, weight, bias, None if act is Activation.NONE else act.value, residual, mul)


def gemm(a: Tensor, b: Tensor, c: Tensor | None, alpha: float, beta: float, out: Tensor | None) -> Tensor:
    """``autocutlass.gemm`` through ``torch.ops.autocutlass.gemm`` (or ``gemm_out``)."""
    _require_tensors("gemm", a=a, b=b, c=c, out=out)
    alpha, beta = float(alpha), float(beta)
    if out is None:
        return torch.ops.autocutlass.gemm(a, b, c, alpha, beta)
    torch.ops.autocutlass.gemm_out(a, b, c, alpha, beta, out)
    return out


def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, bias: Tensor | None, scale_result: Tensor | None,
              out_dtype: torch.dtype | None, use_fast_accum: bool, out: Tensor | None, activation: Any) -> Tensor:  # fmt: skip
    """``autocutlass.scaled_mm`` through ``torch.ops.autocutlass.scaled_mm`` (or ``scaled_mm_out``)."""
    for name, t in (("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(t, Tensor):
            raise TypeError(f"autocutlass.scaled_mm: {name} must be a torch.Tensor, got {type(t).__name__}")
    _require_tensors("scaled_mm", bias=bias, scale_result=scale_result, out=out)
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise TypeError(f"autocutlass.scaled_mm: out_dtype must be a torch.dtype or None, got {type(out_dtype).__name__}")
    if not isinstance(use_fast_accum, bool):
        raise TypeError(f"autocutlass.scaled_mm: use_fast_accum must be a bool, got {type(use_fast_accum).__name__}")
    act = _activation(activation)
    act_name = activation if act is None else None if act is Activation.NONE else act.value  # unknown: the op raises
    if out is None:
        return torch.ops.autocutlass.scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum,
                                               act_name)  # fmt: skip
    torch.ops.autocutlass.scaled_mm_out(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, act_name,
                                        out)  # fmt: skip
    return out


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any, dilation: Any, groups: Any,
           activation: Any, residual: Tensor | None) -> Tensor:  # fmt: skip
    """``autocutlass.conv2d`` through ``torch.ops.autocutlass.conv2d``; when autograd records, the
    activation runs outside the kernel (the residual stays fused: its gradient is dZ itself)."""
    call: ConvCall = CONV2D.make_call(x, weight, bias, stride, padding, dilation, groups, None, residual)
    act = _activation(activation)  # last, as in make_call
    _require_tensors("conv2d", input=x, weight=weight, bias=bias, residual=residual)
    if isinstance(call.padding, str):
        pad_ints, pad_mode = [0, 0], call.padding
    else:
        pad_ints, pad_mode = list(call.padding), None
    records = _records(x, weight, bias, residual)
    outside = act is not None and act is not Activation.NONE and records
    fused = activation if act is None else None if act is Activation.NONE or outside else act.value
    args = (x, weight, bias, list(call.stride), pad_ints, pad_mode, list(call.dilation), call.groups, fused, residual)
    if records and eager_autograd(x, weight, bias, residual):
        y = _EagerConv2d.apply(*args)
    else:
        y = torch.ops.autocutlass.conv2d(*args)
    return apply_activation(y, act) if outside else y  # type: ignore[arg-type]


def grouped_mm(x: Tensor, w: Tensor, offs: Tensor | None, bias: Tensor | None, out_dtype: Any,
               activation: Any) -> Tensor:  # fmt: skip
    """``autocutlass.grouped_mm`` through ``torch.ops.autocutlass.grouped_mm``; when autograd
    records, the activation runs outside the kernel (as in ``linear``)."""
    _require_tensors("grouped_mm", x=x, w=w, offs=offs, bias=bias)
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise TypeError(f"autocutlass.grouped_mm: out_dtype must be a torch.dtype or None, got {type(out_dtype).__name__}")
    act = _activation(activation)
    op = torch.ops.autocutlass.grouped_mm
    if act is None:  # unknown: the op raises the eager error
        return op(x, w, offs, bias, out_dtype, activation)
    if act is not Activation.NONE and _records(x, w, bias):
        return apply_activation(op(x, w, offs, bias, out_dtype, None), act)
    return op(x, w, offs, bias, out_dtype, None if act is Activation.NONE else act.value)


__all__ = [
    "NAMESPACE",
    "activation_backward",
    "swiglu_backward",
    "apply_activation",
    "conv2d",
    "conv2d_grads",
    "conv2d_output_format",
    "gemm",
    "grouped_mm",
    "grouped_mm_grads",
    "linear",
    "linear_grads",
    "matmul",
    "matmul_grads",
    "scaled_mm",
]

