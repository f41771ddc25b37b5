"""The entry points users call: ``matmul``, ``linear``, ``gemm``, ``scaled_mm``, ``conv2d``,
``grouped_mm``; ``policy``, ``stats``, ``reset``.

Each forwards to the process's default ``Dispatcher`` (made on first use from the
``AUTOCUTLASS_*`` environment, see ``autocutlass.settings``), which validates the call, looks
the problem up, applies the miss policy and launches on the current CUDA stream; see
``autocutlass.dispatch`` for the hit path's guarantees and ``autocutlass.ops.gemm.frontend`` for what is
served and what falls back to torch.

**Two paths.** An eager call goes to the dispatcher directly: before it, three C-level checks
(grad mode and the inputs' ``requires_grad``, autocast) and ``torch.compiler.is_compiling()``
(two small Python functions, counted by ``tests/test_dispatch_hotpath.py``). The call takes the
*graph path* instead, ``autocutlass.torch_ops`` and its ``torch.ops.autocutlass.*`` custom ops,
when torch.compile traces it, when autograd must record it (grad mode on and an input requires
grad; ``matmul``, ``linear``, ``gemm``, ``conv2d``, ``grouped_mm``) or when autocast is on for any
device (``matmul``, ``linear``, ``gemm``, ``conv2d`` without ``out=``: the ops' Autocast kernels cast
as torch's would, before any dtype check). So inference pays no op boundary, training runs our
kernels forwards and backwards, and compiled graphs hold our ops.
"""

from __future__ import annotations

import logging
import threading

import torch

from autocutlass import settings as settings_mod
from autocutlass import torch_ops as _ops
from autocutlass.dispatch import Dispatcher, Stats, policy
from autocutlass.ops.conv.frontend import CONV2D, channels_last_input
from autocutlass.ops.gemm.entries import GEMM, LINEAR, MATMUL, SCALED_MM
from autocutlass.ops.gemm.problem import Activation
from autocutlass.ops.grouped.frontend import GROUPED_MM

__all__ = ["conv2d", "dispatcher", "gemm", "grouped_mm", "linear", "matmul", "policy", "reset", "scaled_mm", "stats"]

_default: Dispatcher | None = None
_default_lock = threading.Lock()

_COMPILING = torch.compiler.is_compiling
"""True while torch.compile traces (Dynamo folds it to True), False when code runs."""
_GRAD = torch.is_grad_enabled
_AUTOCAST = torch._C._is_any_autocast_enabled
"""Whether autocast is on for any device (CPU autocast included: the dispatcher's dtype checks
would otherwise run before torch casts, where ``F.linear`` under CPU autocast accepts mixed
dtypes)."""
_CL = torch.channels_last


def _make_default() -> Dispatcher:
    global _default
    with _default_lock:
        if _default is None:
            s = settings_mod.current()
            logger = logging.getLogger("autocutlass")
            if logger.level == logging.NOTSET:  # AUTOCUTLASS_LOG, unless the application set a level
                try:
                    logger.setLevel(s.log_level)
                except ValueError:
                    raise ValueError(f"AUTOCUTLASS_LOG={s.log_level!r} is not a logging level name") from None
            _default = Dispatcher(s)
        return _default


def matmul(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.matmul(a, b, out=out)`` for 2-D and 3-D tensors, on autocutlass's tuned kernels.

    Any of the four layouts (either operand may be a transposed view); 3-D operands are batched;
    a 3-D A under a 2-D B folds its batch into M without copies when A's rows are contiguous
    across batches. Shape mismatches raise ``RuntimeError`` naming both shapes; an ``out=`` of
    the wrong shape, dtype or device raises. Calls autocutlass does not serve run torch's op.
    Differentiable (the backward's GEMMs are autocutlass calls too); autocast casts as for
    ``torch.matmul``; under torch.compile it is ``torch.ops.autocutlass.matmul``."""
    try:
        graph = _COMPILING() or (out is None and (_AUTOCAST() or _GRAD() and (a.requires_grad or b.requires_grad)))
    except AttributeError:  # not tensors: the dispatcher raises the error the eager API raises
        graph = False
    if graph:
        return _ops.matmul(a, b, out)
    return (_default or _make_default()).call(MATMUL, a, b, out)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    activation: Activation | str | None = None,
    residual: torch.Tensor | None = None,
    mul: torch.Tensor | None = None,
) -> torch.Tensor:
    """``activation(torch.nn.functional.linear(x, weight, bias) + residual) * mul`` in one kernel.

    ``x``: (..., K), its leading dimensions flattened into M (a view when they merge);
    ``weight``: (N, K); ``bias``: (N,) or None; ``activation``: None, 'relu', 'gelu' (erf),
    'gelu_tanh' or 'silu', applied in the epilogue; ``residual``: None or a tensor that broadcasts
    to the result, added in the epilogue before the activation (a transformer's residual stream:
    ``h + o_proj(attn)`` without a separate pass over ``h``; the kernel reads a residual of the
    result's exact shape with N-contiguous rows, torch adds any other); ``mul``: None or a tensor
    that broadcasts to the result, multiplied in after the activation (a gated MLP:
    ``linear(x, w_gate, activation="silu", mul=linear(x, w_up))`` is ``silu(gate) * up`` without
    the two elementwise passes; served by the ``hopper_gemm_gated`` kernels, unless
    ``AUTOCUTLASS_GATED_KERNELS=0``, for a mul of the result's exact shape and no residual; torch
    computes the other cases). Returns (..., N). ``activation="swiglu"``: ``weight`` (2N, K) packs
    gate rows then up rows (``torch.cat([w_gate, w_up])``), ``bias`` None or (2N,) likewise; returns
    ``silu(x w_gate^T + b_gate) * (x w_up^T + b_up)`` (..., N) from one GEMM whose epilogue pairs
    gate and up columns (the ``hopper_gemm_swiglu`` kernels, unless ``AUTOCUTLASS_SWIGLU_KERNELS=0``,
    when torch computes ``F.linear`` then ``silu(g) * u``); a weight of odd rows, a ``residual`` or a
    ``mul`` with it raise ``ValueError``.

    Differentiable: dX = dZ W, dW = dZ^T X, db = sum dZ, d residual = dZ (summed to its shape),
    with dZ = dY through the activation, each GEMM an autocutlass call. While autograd records, the
    activation runs after the kernel, in torch (its derivative needs the pre-activation, which the
    fused epilogue does not keep; see ``autocutlass.torch_ops``)."""
    try:
        graph = _COMPILING() or _AUTOCAST() or _GRAD() and (
            x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
            or (residual is not None and residual.requires_grad) or (mul is not None and mul.requires_grad))
    except AttributeError:  # not tensors: the dispatcher raises the error the eager API raises
        graph = False
    if graph:
        return _ops.linear(x, weight, bias, activation, residual, mul)
    return (_default or _make_default()).call(LINEAR, x, weight, bias, activation, residual, mul)


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``alpha * (a @ b) + beta * c`` with ``a @ b`` as in ``matmul``.

    ``c`` must broadcast to the product's shape (the kernel serves a ``c`` of exactly that
    shape, N-contiguous; others run in torch) and is ignored when ``beta == 0``, as in BLAS.
    ``out`` may be ``c`` itself (an in-place update). Differentiable in a, b and c (dA = alpha dY
    B^T, dB = alpha A^T dY, dC = beta dY), each GEMM an autocutlass call."""
    try:
        graph = _COMPILING() or (out is None and (_AUTOCAST() or _GRAD() and (
            a.requires_grad or b.requires_grad or (c is not None and c.requires_grad))))
    except AttributeError:  # not tensors: the dispatcher raises the error the eager API raises
        graph = False
    if graph:
        return _ops.gemm(a, b, c, alpha, beta, out)
    return (_default or _make_default()).call(GEMM, a, b, c, alpha, beta, out)


def scaled_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: torch.Tensor | None = None,
    scale_result: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    use_fast_accum: bool = False,
    *,
    out: torch.Tensor | None = None,
    activation: Activation | str | None = None,
) -> torch.Tensor:
    """``activation(torch._scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype,
    use_fast_accum))``, a drop-in for ``torch._scaled_mm``: the same arguments in the same order
    (``bias``, ``scale_result``, ``out_dtype``, ``use_fast_accum`` positional or keyword), plus
    two keyword-only extras, ``out`` (an (M, N) tensor of the result's dtype to write) and
    ``activation`` (None, 'relu', 'gelu', 'gelu_tanh' or 'silu', as in ``linear``).

    **Served by autocutlass's fp8 kernel**, ``activation((a.float() @ b.float()) * scale_a *
    scale_b + bias)`` rounded to ``out_dtype`` with the activation in the epilogue: ``a`` (M, K)
    ``float8_e4m3fn``, row-major, 16-byte aligned; ``b`` (K, N) ``float8_e4m3fn``,
    column-major, i.e. ``W.t()`` of a row-major (N, K) weight (fp8 WGMMA reads only K-major
    operands), 16-byte aligned; ``scale_a``, ``scale_b`` per-tensor float32 scales of one
    element on the operands' device (read by the kernel on the GPU, never by the host, so a call
    does not synchronise); ``bias`` None or a contiguous (N,) vector of ``out_dtype``;
    ``scale_result`` None; ``out_dtype`` bfloat16, float16 or float32; ``use_fast_accum=True``
    (the kernel accumulates in WGMMA's accumulator across all of K, which is fast accumulation).

    **Everything else runs ``torch._scaled_mm``** (then the activation), which serves it or
    raises its own error; it is logged once per reason, or raised as ``UnsupportedProblem`` under
    ``AUTOCUTLASS_STRICT=1``: torch's default ``use_fast_accum=False``, ``out_dtype=None``
    (torch's default: fp8 output) or another ``out_dtype``, a ``scale_result``, e5m2 or mixed
    e4m3/e5m2 (or other float8/float4) operands, row-wise or other non-per-tensor scales, scales
    of another dtype, a bias of another dtype than ``out_dtype`` or not of shape (N,), other
    layouts, ranks or alignments, empty results, CPU tensors, GPUs other than sm_90, and inputs
    that require grad.

    **Raised here**, naming the argument: an argument that is not a tensor, an ``out_dtype``
    that is not a ``torch.dtype`` or None and a ``use_fast_accum`` that is not a bool
    (``TypeError``); ``a`` or ``b`` not float8 at all, e.g. bfloat16 (``RuntimeError`` naming both
    dtypes), shapes that cannot be multiplied (``RuntimeError`` naming both shapes), a bias of
    another number of elements than N, tensors on different devices, an ``out`` of the wrong
    shape, dtype or device, an unknown activation (``ValueError``).

    Not differentiable (nor is ``torch._scaled_mm``); not autocast. Under torch.compile it is
    ``torch.ops.autocutlass.scaled_mm``."""
    if _COMPILING():
        return _ops.scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, out, activation)
    return (_default or _make_default()).call(
        SCALED_MM, a, b, scale_a, scale_b, bias, out_dtype, out, activation, use_fast_accum, scale_result
    )


def conv2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] | str = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
    *,
    activation: Activation | str | None = None,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """``activation(F.conv2d(x, weight, bias, stride, padding, dilation, groups) + residual)``.

    A drop-in for ``torch.nn.functional.conv2d`` (int or pair stride/padding/dilation, padding
    'same'/'valid'), plus ``activation`` (None, 'relu', 'gelu', 'gelu_tanh', 'silu', as in
    ``linear``) and ``residual`` (a tensor of the output's shape added before the activation),
    fused in the epilogue when served. Served by autocutlass's kernels: pointwise convolutions
    (1x1, stride 1, no padding, groups 1) of channels_last bf16/fp16 tensors (fp32 through TF32
    when ``torch.backends.cudnn.allow_tf32``), tuned and remembered per layer as conv2d problems;
    the output is channels_last, as ``F.conv2d``'s. Everything else runs ``F.conv2d`` (logged once
    per reason; ``AUTOCUTLASS_STRICT=1`` raises ``UnsupportedProblem``); invalid calls raise as
    ``F.conv2d`` does. See ``autocutlass.ops.conv.frontend``.

    Differentiable: dX and dW are autocutlass calls of their own (``torch.ops.autocutlass.conv2d_dgrad``
    and ``conv2d_wgrad``: conv2d problems of directions 'dgrad' and 'wgrad', served by our kernels
    where a family computes them, by ``aten.convolution_backward`` otherwise), db sums dY; while
    autograd records, the activation runs after the kernel, in torch (as in ``linear``).

    An NCHW x with a channels_last weight (a GroupNorm's output in a channels_last model) is made
    channels_last first, the copy ``F.conv2d`` would make itself on CUDA
    (``ops.conv.frontend.channels_last_input``), so that our kernels serve it."""
    if isinstance(x, torch.Tensor) and not x.is_contiguous(memory_format=_CL):  # the hit path: one stride check
        x = channels_last_input(x, weight, groups)
    try:
        graph = _COMPILING() or _AUTOCAST() or _GRAD() and (
            x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
            or (residual is not None and residual.requires_grad))
    except AttributeError:  # not tensors: the dispatcher raises the error the eager API raises
        graph = False
    if graph:
        return _ops.conv2d(x, weight, bias, stride, padding, dilation, groups, activation, residual)
    return (_default or _make_default()).call(CONV2D, x, weight, bias, stride, padding, dilation, groups, activation,
                                              residual)  # fmt: skip


def grouped_mm(
    x: torch.Tensor,
    w: torch.Tensor,
    offs: torch.Tensor | None = None,
    *,
    bias: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    activation: Activation | str | None = None,
) -> torch.Tensor:
    """``activation(torch._grouped_mm(x, w, offs) + bias[group])``: the grouped GEMM of
    mixture-of-experts layers, with ``torch._grouped_mm``'s semantics.

    The served form: x (T, K) with rows sorted by expert, w (E, K, N) (or the transposed view
    ``w.transpose(-2, -1)`` of an (E, N, K) weight), ``offs`` (E,) int32 cumulative row ends on
    x's device (experts may be empty); returns (T, N), rows ``offs[g-1]:offs[g]`` equal to
    ``x[rows] @ w[g]`` and rows past ``offs[-1]`` zero. ``bias``: None or (E, N), one row per
    expert, in the output's dtype; ``out_dtype``: None (x's dtype), x's dtype or torch.float32;
    ``activation``: None, 'relu', 'gelu', 'gelu_tanh' or 'silu', applied last. bf16/fp16 calls on
    an sm_90 GPU run autocutlass's grouped kernel, tuned per (E, N, K, dtypes, layout, epilogue)
    and a power-of-two bucket of T: the kernel reads ``offs`` on the GPU, so a new routing never
    synchronises, recompiles or re-tunes, and calls can be captured in CUDA graphs.

    The other forms of ``torch._grouped_mm`` (x 2-D and w 2-D: groups along K, the weight
    gradient, out (E, M, N); both 3-D: batched; x 3-D and w 2-D: groups along N), float32 operands
    and CPU tensors run ``torch._grouped_mm`` (then bias and activation), logged once per reason.
    Invalid calls raise ``RuntimeError`` as torch does (``ops.grouped.frontend``), including
    ``offs`` that are not int32, not on x's device, negative, decreasing or past T (values are
    checked once per tensor-metadata fingerprint for GPU offsets, on every call for CPU ones).

    Differentiable: dX = dY W_g^T per group (the same form) and dW_g = X_g^T dY_g (groups along
    K) are ``grouped_mm`` calls too, dbias sums dY's rows per group; while autograd records, the
    activation runs after the kernel, in torch (as in ``linear``). Under torch.compile it is
    ``torch.ops.autocutlass.grouped_mm``."""
    try:
        graph = _COMPILING() or _GRAD() and (
            x.requires_grad or w.requires_grad or (bias is not None and bias.requires_grad))
    except AttributeError:  # not tensors: the dispatcher raises the error the eager API raises
        graph = False
    if graph:
        return _ops.grouped_mm(x, w, offs, bias, out_dtype, activation)
    return (_default or _make_default()).call(GROUPED_MM, x, w, offs, bias, out_dtype, activation)


def dispatcher() -> Dispatcher:
    """The process's default ``Dispatcher`` (made on first use; ``reset()`` forgets it): what the
    entry points and the ``torch.ops.autocutlass`` ops' real kernels call."""
    return _default or _make_default()


def stats() -> Stats:
    """Counters of the default dispatcher: memo hits and misses, database lookups and hits,
    recorded misses, tunings, compiles, torch fallbacks."""
    return (_default or _make_default()).stats()


def reset() -> None:
    """Forget the default dispatcher (memo, counters, open database) and re-read the
    ``AUTOCUTLASS_*`` environment on the next call. Compiled kernels stay cached."""
    global _default
    with _default_lock:
        _default = None
