"""Types every op's problem shares: element types, operand majors, epilogue activations, the
epilogue itself, field checks and the serialisation and keys of problems (``ProblemFields``).
Pure Python."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from autocutlass.keys import canonical_json


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
    ``c_mul`` (with ``with_c``): C multiplies instead, after the activation,
    D = act(alpha*acc + bias) * C (a gated MLP's ``act(x W_gate^T) * up`` in one kernel).
    ``swiglu`` (with ``activation`` SILU, without C): the GEMM's N columns are a packed weight's
    gate rows then its up rows, and D has N/2 columns, D = silu(acc_gate + b_gate) *
    (acc_up + b_up) (``linear(x, cat([w_gate, w_up]), activation="swiglu")``); the bias has N values.
    """

    with_c: bool = False
    bias: bool = False
    activation: Activation = Activation.NONE
    c_mul: bool = False
    swiglu: bool = False

    def __post_init__(self) -> None:
        if self.c_mul and not self.with_c:
            raise ValueError("Epilogue: c_mul multiplies by C, so it needs with_c")
        if self.swiglu and (self.with_c or self.activation is not Activation.SILU):
            raise ValueError("Epilogue: swiglu is silu(gate) * up: it needs activation SILU and no C")

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"with_c": self.with_c, "bias": self.bias, "activation": self.activation.value}
        if self.c_mul:  # only when set: every other problem keeps the key it always had
            d["c_mul"] = True
        if self.swiglu:  # likewise
            d["swiglu"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Epilogue:
        return cls(with_c=bool(d["with_c"]), bias=bool(d["bias"]), activation=Activation(d["activation"]),
                   c_mul=bool(d.get("c_mul", False)), swiglu=bool(d.get("swiglu", False)))  # fmt: skip

    @property
    def is_plain(self) -> bool:
        return not (self.with_c or self.bias or self.activation is not Activation.NONE)


VALID_ALIGNMENTS = (1, 2, 4, 8, 16)


KEY_VERSION = 1
"""Bumped when the meaning of a problem key changes; old records then stop matching."""


def check_dims(obj: object, names: tuple[str, ...], *, minimum: int) -> None:
    """Raise ValueError naming the first of ``names`` that is not an int >= ``minimum``."""
    for name in names:
        v = getattr(obj, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            kind = "non-negative" if minimum == 0 else "positive" if minimum == 1 else f">= {minimum}"
            raise ValueError(f"{type(obj).__name__}.{name} must be a {kind} int, got {v!r}")


def check_alignments(obj: object, names: tuple[str, ...]) -> None:
    """Raise ValueError naming the first of ``names`` that is not a valid alignment in bytes."""
    for name in names:
        v = getattr(obj, name)
        if v not in VALID_ALIGNMENTS:
            raise ValueError(f"{type(obj).__name__}.{name} must be one of {VALID_ALIGNMENTS} bytes, got {v!r}")


class ProblemFields:
    """Serialisation and keys every op's problem dataclass shares (``ops.base.OpProblem``).

    A subclass is a frozen dataclass with ``op``, ``RUNTIME_DIMS`` (the fields ``neighbour_key``
    drops) and ``NEIGHBOUR_TAG`` (the key's tag; GEMM keeps its historical 'family', so stored
    GEMM keys stay byte-identical). Keys are canonical JSON of plain field values
    (``autocutlass.keys.canonical_json``), never ``repr`` or ``hash``.
    """

    op: ClassVar[str]
    RUNTIME_DIMS: ClassVar[tuple[str, ...]]
    NEIGHBOUR_TAG: ClassVar[str] = "neighbours"

    def as_dict(self) -> dict[str, Any]:
        """Plain-data form (JSON-able), the inverse of ``from_dict``; ``op`` included."""
        d: dict[str, Any] = {"op": self.op}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            d[f.name] = v.as_dict() if isinstance(v, Epilogue) else v.value if isinstance(v, StrEnum) else v
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Any:
        kw = dict(d)
        if kw.pop("op", cls.op) != cls.op:
            raise ValueError(f"not a {cls.op} problem: {d!r}")
        kw["epilogue"] = Epilogue.from_dict(kw["epilogue"])
        return cls(**kw)

    def key(self) -> str:
        """Canonical, process-stable identity of this exact problem."""
        return canonical_json({"v": KEY_VERSION, **self.as_dict()})

    def bucket(self) -> Any:
        raise NotImplementedError

    def bucket_key(self) -> str:
        return self.bucket().key()  # type: ignore[no-any-return]

    def neighbour_key(self) -> str:
        """Everything but the run-time dimensions: problems that differ only in those are
        neighbours, and the nearest tuned one serves a bucket never tuned."""
        return canonical_json({"v": KEY_VERSION, self.NEIGHBOUR_TAG: self._without(*self.RUNTIME_DIMS)})

    def _without(self, *names: str) -> dict[str, Any]:
        d = self.as_dict()
        for name in names:
            del d[name]
        return d

    def _class_key(self, *sizes: str, **extra: Any) -> str:
        """The kernel-class key: every field but the symbolic ``sizes``, plus ``extra``."""
        return canonical_json({"v": KEY_VERSION, "class": {**self._without(*sizes), **extra}})
