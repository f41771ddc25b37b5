"""The contract between a kernel family and the layers above it (search, dispatch).

A *family* is a parameterised kernel: a frozen config dataclass, a pure-Python ``check``
that rejects infeasible (config, problem) pairs with a reason, a ``space`` to search, and a
``compile`` that turns a config into a callable runner for a problem's *kernel class*
(dtypes, layouts, alignment, epilogue; shapes are symbolic, so one compiled runner serves every
size of its class). Problems are ``autocutlass.ops.base.OpProblem``s; a family says which it
serves through ``supports``. The runner's calling convention is the op's: a GEMM family's
runners are ``GemmRunner``s (below); a family serving another op through a lowering (a
pointwise convolution is a GEMM) returns a runner in that op's convention.

Each family names the files whose code decides what it generates (``SOURCE_FILES``, relative to
``autocutlass/kernels``, its own and the shared ones it imports); their ``source_hash`` is part
of the hard key of its tuning records, so editing one family never retires another's records.

Calling convention of a ``GemmRunner`` (torch tensors on one CUDA device, current stream):

* ``a``: (M, K) or (L, M, K); either of its two last dims may be the contiguous one.
* ``b``: (K, N) or (L, K, N); likewise (``W.t()`` of an (N, K) weight is K-contiguous).
* ``d``: output, (M, N) or (L, M, N), N contiguous; written, never read.
* ``c``: optional, same shape as ``d``, N contiguous (read when the epilogue has ``with_c``).
* ``bias``: optional, (N,), contiguous (read when the epilogue has ``bias``).
* ``alpha``, ``beta``: Python floats.
* ``scale_a``, ``scale_b``: fp8 (e4m3) problems only, and then required: float32 CUDA tensors of
  one element (per-tensor scales; D = act(scale_a * scale_b * alpha * A @ B + ...)). Other
  problems are called without them.

The runner launches asynchronously on ``torch.cuda.current_stream()`` and never synchronises.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from autocutlass.device import source_hash


class GemmRunner(Protocol):
    def __call__(
        self,
        a: Any,
        b: Any,
        d: Any,
        *,
        c: Any | None = None,
        bias: Any | None = None,
        alpha: float = 1.0,
        beta: float = 0.0,
        scale_a: Any | None = None,
        scale_b: Any | None = None,
    ) -> None: ...


C = TypeVar("C")


class KernelFamily(ABC, Generic[C]):
    """A tunable kernel family. Implementations are stateless apart from compile caches."""

    name: str
    """Stable identifier stored in the database ('hopper_gemm')."""

    SOURCE_FILES: ClassVar[tuple[str, ...]]
    """Files (relative to ``autocutlass/kernels``) whose code decides what this family generates."""

    TUNED_ONLY: ClassVar[bool] = False
    """True for a family that serves a problem only from this GPU's record of it or of its bucket
    (or a tuning's winner): where a miss would run a stand-in config (a nearest problem's record,
    a sibling GPU's, a class winner, the default), the torch op serves instead (``dispatch``), for
    a family whose untuned configs lose to a strong torch op (hopper_grouped against
    ``torch._grouped_mm``)."""

    def source_hash(self) -> str:
        """Hash of ``SOURCE_FILES``' code: part of the hard key of this family's tuning records."""
        return source_hash(self.SOURCE_FILES)

    @abstractmethod
    def supports(self, problem: Any) -> str | None:
        """None if some config of this family can serve ``problem``, else the reason why not."""

    @abstractmethod
    def space(self, problem: Any) -> Sequence[C]:
        """Every config of the family worth considering for ``problem`` (feasible or not)."""

    @abstractmethod
    def check(self, config: C, problem: Any) -> str | None:
        """None when ``config`` can run ``problem``; otherwise the reason, naming the budget or
        rule broken. Pure Python, no compile, no GPU. Every accepted pair must compile."""

    @abstractmethod
    def seeds(self, problem: Any) -> Sequence[C]:
        """A few good configs, best guess first, all passing ``check``: TPE seeds and the
        ``heuristic`` policy's choice (the first)."""

    @abstractmethod
    def config_to_dict(self, config: C) -> dict[str, Any]:
        """Plain JSON-able form; ``config_from_dict`` inverts it."""

    @abstractmethod
    def config_from_dict(self, d: dict[str, Any]) -> C: ...

    @abstractmethod
    def compile(self, config: C, problem: Any) -> Any:
        """A runner for ``problem``'s kernel class. Cached in-process and on disk.

        Raises ``CantImplement`` if ``check`` rejects the pair and ``KernelCompileError`` if
        the DSL fails."""

    def feasible_seeds(self, guesses: Sequence[C], problem: Any) -> list[C]:
        """``guesses`` in order, without repeats and without those ``check`` rejects: what
        ``seeds`` returns once a family has listed its first guesses."""
        out: list[C] = []
        for g in guesses:
            if g not in out and self.check(g, problem) is None:
                out.append(g)
        return out

    def fits(self, config: C, tuned: Any, problem: Any) -> bool:
        """Whether ``config``, the winner of the tuned problem ``tuned``, is expected to serve
        ``problem`` (another problem of its bucket, or the nearest tuned one, which ``check``
        accepts it for) about as well as it serves ``tuned``. Where not, the dispatcher treats the
        record as a stand-in, not a hit: ``tune`` tunes the problem, ``cached`` records the miss and
        serves the torch op (vendor verdicts on) or the record. By default every config fits; the GEMM family asks its
        wave model (``hopper_gemm.picks.fits``)."""
        return True

    def prefers(self, problem: Any) -> bool:
        """Whether a miss of ``problem`` (one this family serves) is tuned under this family before
        the families registered earlier (``kernels.families_for``); by default never."""
        return False

    def simplicity(self, config: C) -> tuple[int, ...]:
        """Sort key: smaller is simpler. Ties between equally fast configs go to the simpler."""
        return (0,)
