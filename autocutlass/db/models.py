"""SQLAlchemy 2.0 typed models of the tuning database (schema version ``SCHEMA_VERSION``).

Tables:

* ``meta``      key/value text; ``schema_version`` lives here.
* ``devices``   one row per hard key (``HardKey.key()``), its fields as columns, plus
                informative JSON (``DeviceInfo.as_dict()``) that never takes part in matching.
* ``problems``  one row per ``OpProblem.key()`` of any op: ``op`` (the op's name), ``bucket_key``
                and ``neighbour_key`` (indexed, for the bucket and nearest-neighbour lookups),
                ``dims`` (the op's ``dims()`` as canonical JSON text, informative) and the
                problem itself as JSON (``as_dict()``, rebuilt by ``ops.registry.problem_from_dict``).
* ``trials``    every evaluated candidate, failures included, with its state and reason.
* ``best``      the winner per (problem, device).
* ``misses``    problems dispatch found no record for, per device (``tune --pending``).

Config JSON is stored as canonical text (``autocutlass.keys.canonical_json``), so equal configs are equal
strings on every backend. Timestamps are naive UTC. Changing any table means bumping
``SCHEMA_VERSION`` and adding a step to ``schema.MIGRATIONS``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from autocutlass.db.records import TrialState
from autocutlass.db.versions import META_TABLE, SCHEMA_VERSION  # noqa: F401 - the version of the tables below

_STATES = ", ".join(f"'{s.value}'" for s in TrialState)


class Base(DeclarativeBase):
    """Declarative base of the tuning-database models."""


class Meta(Base):
    __tablename__ = META_TABLE

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Device(Base):
    __tablename__ = "devices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hard_key: Mapped[str] = mapped_column(Text, unique=True)
    gpu_name: Mapped[str] = mapped_column(String(128), index=True)
    cc: Mapped[str] = mapped_column(String(16))
    sm_count: Mapped[int] = mapped_column(Integer)
    dsl_version: Mapped[str] = mapped_column(String(64))
    kernel_hash: Mapped[str] = mapped_column(String(64))
    protocol_version: Mapped[int] = mapped_column(Integer)
    info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ProblemRow(Base):
    __tablename__ = "problems"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(Text, unique=True)
    op: Mapped[str] = mapped_column(String(32), index=True)
    bucket_key: Mapped[str] = mapped_column(Text, index=True)
    neighbour_key: Mapped[str] = mapped_column(Text, index=True)
    dims: Mapped[str] = mapped_column(Text)
    problem: Mapped[dict[str, Any]] = mapped_column(JSON)


class Trial(Base):
    __tablename__ = "trials"
    __table_args__ = (
        CheckConstraint(f"state IN ({_STATES})", name="ck_trials_state"),
        Index("ix_trials_problem_device_family", "problem_id", "device_id", "family"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id", ondelete="CASCADE"), index=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"))
    family: Mapped[str] = mapped_column(String(64))
    config: Mapped[str] = mapped_column(Text)
    config_key: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    median_ms: Mapped[float | None] = mapped_column(Float)
    p20_ms: Mapped[float | None] = mapped_column(Float)
    p80_ms: Mapped[float | None] = mapped_column(Float)
    tflops: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Best(Base):
    __tablename__ = "best"
    __table_args__ = (UniqueConstraint("problem_id", "device_id", name="uq_best_problem_device"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"))
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id", ondelete="CASCADE"), index=True)
    family: Mapped[str] = mapped_column(String(64))
    config: Mapped[str] = mapped_column(Text)
    median_ms: Mapped[float] = mapped_column(Float)
    tflops: Mapped[float] = mapped_column(Float)
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("trials.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class Miss(Base):
    __tablename__ = "misses"
    __table_args__ = (UniqueConstraint("problem_id", "device_id", name="uq_misses_problem_device"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"))
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id", ondelete="CASCADE"), index=True)
    count: Mapped[int] = mapped_column(Integer)
    first_seen: Mapped[datetime] = mapped_column(DateTime)
    last_seen: Mapped[datetime] = mapped_column(DateTime)
