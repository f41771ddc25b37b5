"""``GemvPlan``: everything one compiled decode GEMV kernel is specialised on (shapes symbolic).
Pure Python: the compile key and the kernel read it; nothing here imports the DSL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autocutlass.kernels.hopper_gemv.config import GemvConfig
from autocutlass.ops.gemm.problem import Activation, DType, GemmProblem


@dataclass(frozen=True)
class GemvPlan:
    config: GemvConfig
    ab_dtype: DType
    d_dtype: DType
    c_dtype: DType | None
    bias: bool
    activation: Activation

    @property
    def with_c(self) -> bool:
        return self.c_dtype is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.as_dict(),
            "ab_dtype": self.ab_dtype.value,
            "d_dtype": self.d_dtype.value,
            "c_dtype": None if self.c_dtype is None else self.c_dtype.value,
            "bias": self.bias,
            "activation": self.activation.value,
        }


def make_plan(config: GemvConfig, problem: GemmProblem) -> GemvPlan:
    epi = problem.epilogue
    return GemvPlan(config, problem.a_dtype, problem.d_dtype, problem.c_dtype if epi.with_c else None, epi.bias,
                    epi.activation)  # fmt: skip
