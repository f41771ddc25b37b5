"""Epilogue math shared by our CuTe DSL kernels: one definition of every activation.

``activation(x, act)`` is the elementwise activation the GEMM epilogue and the split-K reduce
kernel apply last, in fp32 registers. ``epilogue_value`` is the whole per-element formula
``act(alpha * acc + beta * c + bias)`` in the order both kernels evaluate it. Both are
``@cute.jit`` helpers meant to be called from inside a kernel (the call is inlined); ``act``
and the presence of ``c``/``bias`` are compile-time choices (``const_expr`` branches), so an
unused branch generates no code.

Formulas (fp32; they match torch's):

* RELU: ``max(x, 0)``
* GELU (erf form, ``F.gelu(approximate="none")``): ``0.5 * x * (1 + erf(x / sqrt(2)))``
* GELU_TANH (``F.gelu(approximate="tanh")``):
  ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))``
* SILU: ``x / (1 + exp(-x))``

This module imports the DSL at module level: it is imported only by kernel modules (never by
``hopper_gemm/__init__``, ``check`` or ``plan``), so importing the package stays DSL-free.
"""

from __future__ import annotations

from typing import Any

import cutlass
from cutlass import cute

from autocutlass.ops.gemm.problem import Activation

GELU_K = 0.7071067811865476
"""1/sqrt(2): the erf-form GELU's scale."""
GELU_TANH_K = 0.7978845608028654
"""sqrt(2/pi): the tanh-form GELU's scale."""
GELU_TANH_CUBIC = 0.044715
"""The tanh-form GELU's cubic coefficient."""


@cute.jit
def activation(x: cutlass.Float32, act: cutlass.Constexpr[Activation]) -> cutlass.Float32:
    """``act`` applied to one fp32 value; ``Activation.NONE`` returns ``x`` unchanged."""
    if cutlass.const_expr(act == Activation.RELU):
        x = cute.arch.fmax(x, cutlass.Float32(0.0))
    elif cutlass.const_expr(act == Activation.GELU):
        x = 0.5 * x * (1.0 + cute.math.erf(x * GELU_K))
    elif cutlass.const_expr(act == Activation.GELU_TANH):
        x = 0.5 * x * (1.0 + cute.math.tanh(GELU_TANH_K * (x + GELU_TANH_CUBIC * x * x * x)))
    elif cutlass.const_expr(act == Activation.SILU):
        x = x / (1.0 + cute.math.exp(-x))
    return x


@cute.jit
def epilogue_value(
    acc: cutlass.Float32,
    alpha: cutlass.Float32,
    beta: cutlass.Float32,
    c: Any,
    bias: Any,
    act: cutlass.Constexpr[Activation],
) -> cutlass.Float32:
    """``act(alpha * acc + beta * c + bias)`` for one element, in fp32.

    ``c`` and ``bias`` are values of any float type (converted to fp32) or ``None`` (the term is
    left out at compile time). The order of operations is the GEMM epilogue's: scale, add the
    C term, add the bias, activate.
    """
    x = acc * alpha
    if cutlass.const_expr(c is not None):
        x = x + beta * c.to(cutlass.Float32)
    if cutlass.const_expr(bias is not None):
        x = x + bias.to(cutlass.Float32)
    return activation(x, act)
