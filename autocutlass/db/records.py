"""Plain data the tuning database hands to callers: trial states, records, canonical config text.

Nothing here touches SQLAlchemy. Records are frozen dataclasses built inside a session from
column values and returned after the session closed, so no ORM object ever leaks out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError
from autocutlass.keys import canonical_json as canonical_json  # the db layer's names for the shared keys
from autocutlass.keys import config_key as config_key
from autocutlass.ops.base import OpProblem
from autocutlass.ops.registry import problem_from_dict

LookupSource = Literal["exact", "bucket", "nearest"]
"""How a ``BestRecord`` was found: the problem itself, a tuned problem of its bucket
(``bucket_key``), or the nearest tuned neighbour (same ``neighbour_key``, smallest
``neighbour_distance``)."""


class TrialState(StrEnum):
    """Outcome of evaluating one candidate config; failures are recorded states, not exceptions."""

    OK = "ok"
    CANT_IMPLEMENT = "cant_implement"
    COMPILE_ERROR = "compile_error"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"
    CRASH = "crash"


def hard_key_from_json(text: str) -> HardKey:
    """Inverse of ``HardKey.key()``."""
    d = json.loads(text)
    return HardKey(
        gpu_name=str(d["gpu_name"]),
        cc=str(d["cc"]),
        sm_count=int(d["sm_count"]),
        dsl_version=str(d["dsl_version"]),
        kernel_hash=str(d["kernel_hash"]),
        protocol_version=int(d["protocol_version"]),
    )


def stored_problem(d: Any, origin: str) -> OpProblem:
    """The problem of a stored problem JSON value (``as_dict()`` of any op, rebuilt through
    ``ops.registry.problem_from_dict``). A value this autocutlass cannot read (an unknown op, a
    missing or unknown field) raises DatabaseError naming ``origin``."""
    try:
        if not isinstance(d, dict):
            raise TypeError(f"expected a JSON object, got {type(d).__name__}")
        return problem_from_dict(d)
    except (KeyError, TypeError, ValueError) as e:
        raise DatabaseError(
            f"{origin} holds a problem this autocutlass cannot read ({type(e).__name__}: {e}): {str(d)[:200]}"
        ) from e


def utc_now() -> datetime:
    """Now, as the naive UTC datetime the database stores (timezone-naive on every backend)."""
    return datetime.now(UTC).replace(tzinfo=None)


def to_db_time(t: datetime) -> datetime:
    """A datetime as stored: naive UTC (aware values are converted, naive ones taken as UTC)."""
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    return t


def from_db_time(t: datetime) -> datetime:
    """A stored (naive UTC) datetime as an aware UTC datetime for callers."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


@dataclass(frozen=True)
class BestRecord:
    """The winning config of one (problem, hard key), as found by a lookup.

    ``problem`` is the problem the record was tuned for, which differs from the requested one
    when ``source`` is ``"bucket"`` or ``"nearest"``. ``origin`` names the database it came
    from (a file path or a URL without password). ``hard_key`` is the key the record was measured
    under: the caller's, or with ``sibling`` True a sibling GPU's (``HardKey.is_sibling_of``:
    ``hard_key.gpu_name`` names the GPU that measured it). ``note``: the reason recorded with the
    winning trial (``bests()`` only; e.g. ``background.BACKGROUND_NOTE``), else None.
    """

    problem: OpProblem
    family: str
    config: dict[str, Any]
    median_ms: float
    tflops: float
    hard_key: HardKey
    source: LookupSource
    origin: str
    sibling: bool = False
    note: str | None = None


@dataclass(frozen=True)
class TrialRecord:
    """One evaluated candidate. Timing fields are None unless ``state`` is ``ok``."""

    id: int
    problem: OpProblem
    hard_key: HardKey
    family: str
    config: dict[str, Any]
    config_key: str
    state: TrialState
    reason: str | None
    median_ms: float | None
    p20_ms: float | None
    p80_ms: float | None
    tflops: float | None
    created_at: datetime  # aware, UTC
