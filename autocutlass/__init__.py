"""autocutlass: GEMMs tuned per problem on CuTe DSL kernels, remembered in a tuning database.

``matmul``, ``linear`` and ``gemm`` are drop-in for their torch counterparts on CUDA tensors,
``scaled_mm`` (fp8 e4m3 with per-tensor scales) for ``torch._scaled_mm``, ``conv2d`` for
``F.conv2d``, ``grouped_mm`` (mixture-of-experts layers) for ``torch._grouped_mm``;
``policy`` picks what happens when a problem was never tuned; ``stats`` counts what dispatch did;
``prewarm`` starts the on-line tuning processes before the first miss.
``swap_linear_`` / ``unswap_linear_`` (and ``swap_conv2d_`` / ``unswap_conv2d_``, ``swap_gated_mlp_`` /
``unswap_gated_mlp_``, ``swap_qkv_`` / ``unswap_qkv_``, ``swap_experts_`` / ``unswap_experts_`` for
transformers' mixture-of-experts layers) put a whole model's layers on autocutlass in place; ``autocutlass.nn`` holds the modules. The entry points are
differentiable and compile with torch.compile as ``torch.ops.autocutlass.*`` custom ops
(``autocutlass.torch_ops``, registered when the entry points are first imported).
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
    from autocutlass import nn
    from autocutlass.api import conv2d, gemm, grouped_mm, linear, matmul, policy, reset, scaled_mm, stats
    from autocutlass.dispatch import Stats
    from autocutlass.nn import (
        swap_conv2d_,
        swap_experts_,
        swap_gated_mlp_,
        swap_linear_,
        swap_qkv_,
        unswap_conv2d_,
        unswap_experts_,
        unswap_gated_mlp_,
        unswap_linear_,
        unswap_qkv_,
    )
    from autocutlass.warmup import prewarm

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
    "grouped_mm",
    "linear",
    "matmul",
    "nn",
    "policy",
    "prewarm",
    "reset",
    "scaled_mm",
    "stats",
    "swap_conv2d_",
    "swap_experts_",
    "swap_gated_mlp_",
    "swap_linear_",
    "swap_qkv_",
    "unswap_conv2d_",
    "unswap_experts_",
    "unswap_gated_mlp_",
    "unswap_linear_",
    "unswap_qkv_",
]

_LAZY = {
    "conv2d": "autocutlass.api",
    "gemm": "autocutlass.api",
    "grouped_mm": "autocutlass.api",
    "linear": "autocutlass.api",
    "matmul": "autocutlass.api",
    "policy": "autocutlass.api",
    "prewarm": "autocutlass.warmup",
    "reset": "autocutlass.api",
    "scaled_mm": "autocutlass.api",
    "stats": "autocutlass.api",
    "Stats": "autocutlass.dispatch",
    "swap_conv2d_": "autocutlass.nn",
    "swap_linear_": "autocutlass.nn",
    "swap_gated_mlp_": "autocutlass.nn",
    "unswap_gated_mlp_": "autocutlass.nn",
    "unswap_conv2d_": "autocutlass.nn",
    "unswap_linear_": "autocutlass.nn",
    "swap_qkv_": "autocutlass.nn",
    "unswap_qkv_": "autocutlass.nn",
    "swap_experts_": "autocutlass.nn",
    "unswap_experts_": "autocutlass.nn",
}
_LAZY_MODULES = ("nn",)
"""Subpackages reachable as attributes before they are imported (``autocutlass.nn.Linear``)."""


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f"autocutlass.{name}")  # the import binds it in globals()
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'autocutlass' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
