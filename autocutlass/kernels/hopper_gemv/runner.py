"""The callable a compiled decode GEMV becomes (a ``GemmRunner``): torch tensors in, one launch on
the current stream. Serving needs no DSL: the compiled function comes from the kernel cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocutlass.kernels.hopper_gemv.compile import get_compiled
from autocutlass.kernels.hopper_gemv.config import GemvConfig
from autocutlass.ops.gemm.problem import GemmProblem


class GemvRunner:
    swaps_operands = False
    """The kernel reads the caller's operands as they are (``ops.gemm.entries``' direct launch)."""

    def __init__(self, config: GemvConfig, problem: GemmProblem, cache_dir: Path | None) -> None:
        self.config = config
        self.problem = problem
        self._with_c = problem.epilogue.with_c
        self._bias = problem.epilogue.bias
        self._fn = get_compiled(config, problem, cache_dir)

    def direct_launch(self, rank: int, device_index: int, m: int, n: int,
                      l: int) -> tuple[Any, int, Any] | None:  # noqa: E741  # fmt: skip
        """``(fn, 1, None)`` for rank-2 operands (``HopperGemmRunner.direct_launch``'s contract: the
        caller launches ``fn(a, b, d, c, bias, None, None, None, None, alpha, beta, 1)``)."""
        return (self._fn, 1, None) if rank == 2 else None

    def __call__(self, a: Any, b: Any, d: Any, *, c: Any | None = None, bias: Any | None = None, alpha: float = 1.0,
                 beta: float = 0.0, scale_a: Any | None = None, scale_b: Any | None = None) -> None:  # fmt: skip
        if a.dim() == 3:  # an unbatched problem (L = 1) handed over as (1, M, K) tensors
            if a.shape[0] != 1:
                raise ValueError(f"the decode GEMV is not batched: A of shape {tuple(a.shape)}")
            a, b, d = a[0], b[0], d[0]
            c = None if c is None else c[0]
        elif a.dim() != 2:
            raise ValueError(f"the decode GEMV takes 2-D operands, not A of shape {tuple(a.shape)}")
        self._fn(a, b, d, c if self._with_c else None, bias if self._bias else None, None, None, None, None,
                 alpha, beta, 1)  # fmt: skip
