"""Where each op's pieces live, by op name: its problem type and its evaluation module.

Pure Python and lazy: ``problem_from_dict`` imports only the op's ``problem`` module (no torch),
``evaluation_for`` imports the op's ``evaluation`` module (torch) on first use.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from autocutlass.ops.base import OpProblem

PROBLEM_TYPES: dict[str, tuple[str, str]] = {
    "gemm": ("autocutlass.ops.gemm.problem", "GemmProblem"),
    "conv2d": ("autocutlass.ops.conv.problem", "ConvProblem"),
    "grouped_mm": ("autocutlass.ops.grouped.problem", "GroupedGemmProblem"),
}
"""op name -> (module, class) of its problem type."""

EVALUATIONS: dict[str, str] = {
    "gemm": "autocutlass.ops.gemm.evaluation",
    "conv2d": "autocutlass.ops.conv.evaluation",
    "grouped_mm": "autocutlass.ops.grouped.evaluation",
}
"""op name -> its evaluation module (an ``ops.base.Evaluation``); ops without one cannot be tuned yet."""


def op_names() -> list[str]:
    return sorted(PROBLEM_TYPES)


def problem_type(op: str) -> type[Any]:
    try:
        module, name = PROBLEM_TYPES[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}; known: {op_names()}") from None
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def problem_from_dict(d: dict[str, Any]) -> OpProblem:
    """The problem of plain data ``d`` (``problem.as_dict()``); a dict without ``op`` is a GEMM
    (the form every record had before ops other than GEMM existed)."""
    return problem_type(str(d.get("op", "gemm"))).from_dict(d)  # type: ignore[no-any-return]


def evaluation_for(problem: OpProblem) -> ModuleType:
    """The ``Evaluation`` module of ``problem``'s op."""
    try:
        return importlib.import_module(EVALUATIONS[problem.op])
    except KeyError:
        raise ValueError(f"op {problem.op!r} has no evaluation: it cannot be verified or tuned yet") from None
