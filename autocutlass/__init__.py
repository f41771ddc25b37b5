"""autocutlass: GEMMs tuned per problem on CuTe DSL kernels, remembered in a tuning database.

``matmul``, ``linear`` and ``gemm`` are drop-in for their torch counterparts on CUDA tensors,
``scaled_mm`` (fp8 e4m3 with per-tensor scales) for ``torch._scaled_mm``, ``conv2d`` for
``F.conv2d``;
``policy`` picks what happens when a problem was never tuned; ``stats`` counts what dispatch did.
The entry points (and torch) are imported on first use, so ``import autocutlass.db`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autocutlass.errors import (
    AutocutlassError,
    CantImplement,
    DatabaseError,
    KernelCompileError,
    NoGPU,
    SchemaMismatch,
    UnsupportedProblem,
)
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.gemm.problem import Activation, GemmProblem
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.settings import Policy, Settings

if TYPE_CHECKING:
    from autocutlass.api import conv2d, gemm, linear, matmul, policy, reset, scaled_mm, stats
    from autocutlass.dispatch import Stats

__version__ = "0.1.0"

__all__ = [
    "Activation",
    "AutocutlassError",
    "CantImplement",
    "ConvProblem",
    "DatabaseError",
    "KernelCompileError",
    "NoGPU",
    "Policy",
    "GemmProblem",
    "GroupedGemmProblem",
    "SchemaMismatch",
    "Settings",
    "Stats",
    "UnsupportedProblem",
    "__version__",
    "conv2d",
    "gemm",
    "linear",
    "matmul",
    "policy",
    "reset",
    "scaled_mm",
    "stats",
]

_LAZY = {
    "conv2d": "autocutlass.api",
    "gemm": "autocutlass.api",
    "linear": "autocutlass.api",
    "matmul": "autocutlass.api",
    "policy": "autocutlass.api",
    "reset": "autocutlass.api",
    "scaled_mm": "autocutlass.api",
    "stats": "autocutlass.api",
    "Stats": "autocutlass.dispatch",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'autocutlass' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
