"""The contracts every op implements: ``OpProblem`` (the fingerprint the database stores and
looks up), ``Evaluation`` (how the search verifies and times a candidate of that op) and
``FrontEnd`` (how dispatch turns a call into a memo key, a problem and a launch).

The layers below dispatch (``db``, ``search``, ``kernels``) see a problem only through
``OpProblem``; none of them knows which op it is. A new op is a new package under ``ops/``
with these three pieces and a line in ``registry``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class OpProblem(Protocol):
    """One call's fingerprint: a frozen dataclass of typed fields, pure Python.

    Contract:

    * ``op`` names the op ('gemm', 'conv2d', 'grouped_mm'); ``as_dict()`` includes it and
      ``registry.problem_from_dict(p.as_dict()) == p``.
    * ``key()`` is canonical JSON of the fields: equal problems give equal text in every process.
    * ``bucket()`` is the representative of the problems that share one tuned config: the
      dimensions that vary at run time (tokens, batch, spatial size) rounded by the op's
      documented bucket rule, every other field exact. ``bucket_key() == bucket().key()``.
    * ``neighbour_key()`` drops the run-time dimensions: problems with equal neighbour keys can
      serve each other as the nearest match, ranked by ``neighbour_distance`` (smallest first).
    * ``dims()`` the op's dimensions (ints), stored as canonical JSON beside the key.
    * ``flops`` and ``min_bytes`` (fewest bytes a kernel must move), ``describe()`` a short label.
    * ``kernel_class_key()``: everything a compiled kernel is specialised on (no run-time sizes).
    """

    op: str

    def key(self) -> str: ...
    def bucket(self) -> Any: ...
    def bucket_key(self) -> str: ...
    def neighbour_key(self) -> str: ...
    def neighbour_distance(self, other: Any) -> tuple[float, ...]: ...
    def dims(self) -> dict[str, int]: ...
    def as_dict(self) -> dict[str, Any]: ...
    def kernel_class_key(self) -> str: ...
    def describe(self) -> str: ...

    @property
    def flops(self) -> int: ...

    @property
    def min_bytes(self) -> int: ...


class Inputs(Protocol):
    """Operands of one problem on one device, built once and shared by every candidate."""

    output: Any
    """The tensor a runner writes (NaN-poisoned before each check)."""

    def poison(self) -> None:
        """Fill ``output`` with NaN so that elements a kernel never writes fail the check."""

    def run(self, runner: Callable[..., None]) -> None:
        """One launch of ``runner`` on these operands, in the op's runner calling convention (the
        search's inputs may make several, ``calls_per_run``, and its timings are per launch)."""


class Evaluation(Protocol):
    """How the search evaluates a candidate of one op (module ``ops.<op>.evaluation``).

    Everything takes plain ``OpProblem``s and runs on any device (CPU tensors in the unit tests,
    with Python runners); the search layer never looks inside a problem. An op whose one record
    serves inputs its key does not pin down (grouped GEMM: routings) may also define
    ``make_search_inputs`` (same signature as ``make_inputs``), which the search then uses: inputs
    whose ``run`` launches the runner on several of them, with ``calls_per_run`` saying how many.
    """

    def make_inputs(self, problem: Any, *, device: Any, seed: int = 0) -> Inputs: ...
    def reference(self, problem: Any, inputs: Any) -> Any: ...
    def check_output(self, problem: Any, out: Any, ref: Any) -> tuple[bool, str | None]: ...
    def verify(self, runner: Callable[..., None], problem: Any, inputs: Any, ref: Any) -> tuple[bool, str | None]: ...
    def torch_baseline(self, problem: Any, inputs: Any) -> Callable[[], Any]:
        """What the vendor library runs for this problem, on ``inputs`` (timed like a candidate),
        under ``baseline_context(problem)``. An op whose torch path depends on its user's settings
        also defines ``baseline_variants(problem) -> tuple[str, ...]``, the other settings' names,
        which ``baseline_context(problem, variant)`` sets: each is timed in the finals beside the
        main one, on a thread of its own, and recorded as a vendor record of that variant
        (``autocutlass.vendor``: variants; conv2d's ``heuristic``, cuDNN outside benchmark mode)."""


# ---- front-ends: what dispatch needs from an op's entry point ---------------------------------
Entry = Callable[..., Any]
"""A memo entry: called with the entry point's own arguments, it runs the call (a prepared kernel
launch, or torch) and returns the result."""


class Unsupported:
    """A valid call that torch serves instead; ``reason`` says why (logged once per reason, or
    raised as ``UnsupportedProblem`` under ``AUTOCUTLASS_STRICT=1``)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unsupported) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash(self.reason)

    def __repr__(self) -> str:
        return f"Unsupported({self.reason!r})"


class LaunchPlan(Protocol):
    """A call the kernel layer can serve: the problem to look up and tune, and the device."""

    problem: Any
    device_index: int

    @property
    def note(self) -> str | None:
        """A cost worth one log line (e.g. an operand copied on every call), or None."""


class PlanContext(Protocol):
    """What planning needs beyond the call: whether a tensor is on a GPU dispatch serves, and
    the ``DeviceInfo`` of a device index (tests inject fakes for both)."""

    def on_gpu(self, t: Any) -> bool: ...
    def device_info(self, index: int) -> Any: ...


class FrontEnd(Protocol):
    """One public entry point (``matmul``, ``linear``, ``conv2d``, ...) as dispatch sees it.

    Dispatch's hit path is ``memo_key(policy, *args)``, one dict lookup and the entry; on a miss
    it calls ``make_call``, then (policy ``off``) ``expected`` or ``plan``, chooses and compiles a
    kernel for the plan's problem, and memoises ``kernel_entry`` or ``torch_entry``."""

    name: str
    """The entry point's name, in log lines and errors ('matmul').

    Optional: ``vendor_variant() -> str | None``, the variant of torch's path (``autocutlass.vendor``:
    variants) torch's op would run here now, whose vendor record the verdict is judged against
    (conv2d: ``""``, cuDNN in benchmark mode, or ``"heuristic"``), None where torch would run a
    path no tuning timed, so that no verdict applies; absent, ``""`` (the main variant)."""

    def memo_key(self, policy: Any, *args: Any) -> tuple[Any, ...]:
        """A hashable tuple of everything about ``args`` that decides how the call is served
        (tensor metadata, flags; never tensor values), starting with this front-end itself.
        Raises AttributeError or TypeError for arguments that are not what the op takes."""

    def reject(self, *args: Any) -> None:
        """Raise the error the torch op raises for ``args`` whose ``memo_key`` failed."""

    def make_call(self, *args: Any) -> Any:
        """The arguments as the op's call object (validated enough to plan)."""

    def expected(self, call: Any) -> None:
        """Raise what the torch op would raise for ``call`` (used under policy ``off`` too)."""

    def plan(self, call: Any, ctx: PlanContext) -> LaunchPlan | Unsupported:
        """Validate (raising as torch would) and decide how the kernel layer serves ``call``."""

    def torch_entry(self, call: Any) -> Entry:
        """The entry that runs the torch op for calls like ``call``."""

    def kernel_entry(self, plan: Any, runner: Callable[..., None], call: Any) -> Entry:
        """The entry that launches ``runner`` for calls like ``call`` as ``plan`` says."""
