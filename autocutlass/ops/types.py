"""Types every op's problem shares: element types, operand majors, epilogue activations and the
epilogue itself. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class DType(StrEnum):
    """Element types of operands, outputs and accumulators."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    TF32 = "tf32"
    E4M3 = "e4m3"

    @property
    def bytes(self) -> int:
        return _DTYPE_BYTES[self]


_DTYPE_BYTES = {DType.BF16: 2, DType.FP16: 2, DType.FP32: 4, DType.TF32: 4, DType.E4M3: 1}


class Major(StrEnum):
    """Which of an operand's two matrix dimensions is contiguous; see ``ops.gemm.problem``."""

    ROW = "row"
    COL = "col"


class Activation(StrEnum):
    """Elementwise activations the epilogue can apply before the store."""

    NONE = "none"
    RELU = "relu"
    GELU = "gelu"  # erf form, torch.nn.functional.gelu(approximate="none")
    GELU_TANH = "gelu_tanh"  # torch.nn.functional.gelu(approximate="tanh")
    SILU = "silu"


@dataclass(frozen=True)
class Epilogue:
    """What the epilogue does after the mainloop. alpha/beta values are run-time arguments.

    ``with_c``: D = alpha*acc + beta*C reads a C operand (beta != 0). ``bias``: one value per
    output column (length N) broadcast over rows. ``activation``: applied last, in registers.
    """

    with_c: bool = False
    bias: bool = False
    activation: Activation = Activation.NONE

    def as_dict(self) -> dict[str, Any]:
        return {"with_c": self.with_c, "bias": self.bias, "activation": self.activation.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Epilogue:
        return cls(with_c=bool(d["with_c"]), bias=bool(d["bias"]), activation=Activation(d["activation"]))

    @property
    def is_plain(self) -> bool:
        return not (self.with_c or self.bias or self.activation is not Activation.NONE)


VALID_ALIGNMENTS = (1, 2, 4, 8, 16)
