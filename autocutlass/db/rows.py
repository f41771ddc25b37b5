"""Row-level building blocks shared by the store and the transfer code, all inside a session.

Get-or-create of devices and problems, and the dialect upserts of ``best`` and ``misses``
(``INSERT ... ON CONFLICT`` on SQLite and PostgreSQL, so concurrent writers never race on a
read-then-write). Every function takes a Session already in a transaction and commits nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Table, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from autocutlass.db.models import Best, Device, Miss, ProblemRow
from autocutlass.device import HardKey
from autocutlass.keys import canonical_json
from autocutlass.ops.base import OpProblem

_best: Table = Best.__table__  # type: ignore[assignment]
_miss: Table = Miss.__table__  # type: ignore[assignment]
_device: Table = Device.__table__  # type: ignore[assignment]
_problem: Table = ProblemRow.__table__  # type: ignore[assignment]


def dialect_insert(s: Session, table: Table) -> Any:
    """An INSERT with ``on_conflict_do_*`` for the session's backend (SQLite or PostgreSQL)."""
    if s.get_bind().dialect.name == "postgresql":
        return pg_insert(table)
    return sqlite_insert(table)


def ensure_device(s: Session, hk: HardKey, info: Mapping[str, Any] | None = None) -> int:
    """Id of the ``devices`` row of ``hk``, created if missing. A non-empty ``info`` replaces
    the stored informative JSON."""
    key = hk.key()
    found = s.execute(select(Device.id).where(Device.hard_key == key)).scalar_one_or_none()
    if found is None:
        s.execute(
            dialect_insert(s, _device)
            .values(
                hard_key=key,
                gpu_name=hk.gpu_name,
                cc=hk.cc,
                sm_count=hk.sm_count,
                dsl_version=hk.dsl_version,
                kernel_hash=hk.kernel_hash,
                protocol_version=hk.protocol_version,
                info=dict(info or {}),
            )
            .on_conflict_do_nothing(index_elements=["hard_key"])
        )
        found = s.execute(select(Device.id).where(Device.hard_key == key)).scalar_one()
    elif info:
        s.execute(update(_device).where(_device.c.id == found).values(info=dict(info)))
    return int(found)


def ensure_problem(s: Session, problem: OpProblem) -> int:
    """Id of the ``problems`` row of ``problem.key()`` (any op), created if missing."""
    key = problem.key()
    found = s.execute(select(ProblemRow.id).where(ProblemRow.key == key)).scalar_one_or_none()
    if found is None:
        s.execute(
            dialect_insert(s, _problem)
            .values(
                key=key,
                op=problem.op,
                bucket_key=problem.bucket_key(),
                neighbour_key=problem.neighbour_key(),
                dims=canonical_json(problem.dims()),
                problem=problem.as_dict(),
            )
            .on_conflict_do_nothing(index_elements=["key"])
        )
        found = s.execute(select(ProblemRow.id).where(ProblemRow.key == key)).scalar_one()
    return int(found)


def upsert_best(
    s: Session,
    *,
    problem_id: int,
    device_id: int,
    family: str,
    config_text: str,
    median_ms: float,
    tflops: float,
    trial_id: int | None,
    updated_at: datetime,
    keep_faster: bool,
) -> bool:
    """Write the best of (problem, device). With ``keep_faster`` an existing row is replaced only
    by a strictly lower ``median_ms``; otherwise always. Returns True when the row was written."""
    values = {
        "family": family,
        "config": config_text,
        "median_ms": median_ms,
        "tflops": tflops,
        "trial_id": trial_id,
        "updated_at": updated_at,
    }
    stmt = dialect_insert(s, _best).values(problem_id=problem_id, device_id=device_id, **values)
    stmt = stmt.on_conflict_do_update(
        index_elements=["problem_id", "device_id"],
        set_={name: stmt.excluded[name] for name in values},
        where=(stmt.excluded.median_ms < _best.c.median_ms) if keep_faster else None,
    )
    # RETURNING yields a row only when the row was inserted or updated (rowcount is not
    # reliable across drivers for upserts). Needs SQLite >= 3.35.
    return s.execute(stmt.returning(_best.c.id)).first() is not None


def upsert_miss(
    s: Session,
    *,
    problem_id: int,
    device_id: int,
    count: int,
    first_seen: datetime,
    last_seen: datetime,
    mode: Literal["add", "max"],
) -> None:
    """Record misses of (problem, device): ``add`` adds ``count`` to the stored count (dispatch),
    ``max`` keeps the larger count (merging copies of the same history stays idempotent)."""
    stmt = dialect_insert(s, _miss).values(
        problem_id=problem_id, device_id=device_id, count=count, first_seen=first_seen, last_seen=last_seen
    )
    ex = stmt.excluded
    # Scalar two-argument max/min: greatest/least on PostgreSQL, max/min on SQLite.
    pg = s.get_bind().dialect.name == "postgresql"
    larger, smaller = (func.greatest, func.least) if pg else (func.max, func.min)
    new_count = _miss.c["count"] + ex["count"] if mode == "add" else larger(_miss.c["count"], ex["count"])
    first, last = smaller(_miss.c.first_seen, ex.first_seen), larger(_miss.c.last_seen, ex.last_seen)
    s.execute(
        stmt.on_conflict_do_update(
            index_elements=["problem_id", "device_id"],
            set_={"count": new_count, "first_seen": first, "last_seen": last},
        )
    )
