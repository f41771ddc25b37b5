"""The tuning queue: a campaign's problems, claimed one at a time by workers on any host.

Built on Optuna's RDB storage (``optuna.storages.RDBStorage``), which already has what a work
queue needs: trials whose state moves WAITING -> RUNNING under a row lock (``SELECT ... FOR
UPDATE`` on PostgreSQL; on SQLite every transaction here starts with ``BEGIN IMMEDIATE``, so the
same check-then-set is serialised), heartbeats, and the failing of RUNNING trials whose heartbeat
went stale (``fail_stale_trials``) with a callback that queues them again
(``RetryHeartbeatStaleTrialCallback``, at most ``max_retries`` times). Its tables live apart from
the tuning records: in the PostgreSQL schema ``QUEUE_SCHEMA`` of the same database (both have a
``trials`` table), or in the file ``<db file>.queue`` beside a SQLite database.

**Layout.** A campaign (``--campaign``, default ``"default"``) is one Optuna study, its
*manifest*: the problems enqueued (study user attributes ``problem/<id>``: name, problem,
order) and its settings (``campaign``: the tuning budget, ``max_retries``). The hard key of a
record needs the GPU, which ``enqueue`` does not have, so the work is kept per *toolchain* (GPU
model, compute capability, SM count, DSL version, timing protocol and every kernel family's
source hash; ``Toolchain``): the first worker of a toolchain creates the study
``autocutlass/<campaign>/<toolchain digest>`` and copies the manifest into it, one WAITING trial
per problem (*items*). A fleet of H100 and H200 hosts thus tunes every problem once per GPU
model, and a change of kernel sources starts a fresh set of items (whose problems are skipped
quickly where the new hard key already has a record).

**Contract.**

* ``enqueue`` adds problems to the manifest; a problem already there (same ``key()``) is
  skipped, so enqueueing is idempotent. It never touches items.
* ``claim`` (a worker) copies new manifest entries into its toolchain's items (under a lock, so
  no problem is copied twice), fails RUNNING items whose heartbeat is older than ``grace_s``
  (each is queued again as a new WAITING item until it has been tried ``1 + max_retries``
  times; after that it stays failed and ``status`` says why), then moves the first WAITING item
  to RUNNING. Items are made in descending order of their problem's FLOPs (each batch of newly
  copied problems; enqueue order on ties): the longest tunings go first, so the GPUs of a fleet
  run out of work at nearly the same time instead of one tuning a large problem alone at the end
  (largest-first scheduling). Its heartbeat is written *before* the state change, so a claimer killed at any
  point leaves either a WAITING item or a RUNNING one that goes stale: never one that hangs.
* The claimer sends ``heartbeat(item)`` at least every ``heartbeat_s`` seconds while it works,
  and ends the item with exactly one of ``complete`` (tuned, already tuned, skipped: a DONE
  item), ``fail`` (a failure that would repeat: FAILED at once, with its reason) or ``release``
  (back to the queue: as it was, or counted as a retry).
* A claimer whose item was failed by someone else's sweep (its heartbeats stopped reaching the
  database for longer than ``grace_s``) learns it from ``complete`` returning False; the item's
  retry then finds the problem tuned (the worker holds the problem's lock while tuning: see
  ``autocutlass.db.locks``) and completes as "already tuned". So a problem is done once.
* ``status``, ``campaign`` and ``campaigns`` only read (a database without a queue is not given one).

Every storage failure raises ``autocutlass.errors.DatabaseError``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import uuid
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import create_engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from autocutlass.db import engine as eng
from autocutlass.db.locks import LockSpace, acquire, locks_for
from autocutlass.db.records import stored_problem
from autocutlass.device import DeviceInfo
from autocutlass.errors import DatabaseError
from autocutlass.keys import canonical_json
from autocutlass.ops.base import OpProblem
from autocutlass.settings import DbTimeouts

logger = logging.getLogger("autocutlass.db")

QUEUE_SCHEMA = "autocutlass_queue"
"""PostgreSQL schema of the queue's (Optuna's) tables."""
QUEUE_SUFFIX = ".queue"
"""A SQLite database ``X`` keeps its queue in the file ``X.queue``."""
DEFAULT_CAMPAIGN = "default"
DEFAULT_HEARTBEAT_S = 15
"""Seconds between two heartbeats of a claimed item (Optuna takes whole seconds)."""
DEFAULT_GRACE_S = 90
"""A RUNNING item without a heartbeat for longer than this is failed and queued again."""
DEFAULT_MAX_RETRIES = 2
"""Times a problem whose worker died is queued again before it is marked failed."""

_STUDY_PREFIX = "autocutlass/"
_PROBLEM_ATTR = "problem/"
_CAMPAIGN_ATTR = "campaign"
_TOOLCHAIN_ATTR = "toolchain"


# ---- plain data ------------------------------------------------------------------------------
def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def problem_id(problem: OpProblem) -> str:
    """The queue's identity of a problem: 24 hex digits of the sha256 of ``problem.key()``."""
    return hashlib.sha256(problem.key().encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Toolchain:
    """What a worker's GPU and software share with every other worker of its items: the hard key's
    fields, with the source hash of every kernel family (a problem's hard key uses its family's)."""

    gpu_name: str
    cc: str
    sm_count: int
    dsl_version: str
    protocol_version: int
    kernels: tuple[tuple[str, str], ...]
    """(family name, source hash), sorted by name."""

    @classmethod
    def of(cls, device: DeviceInfo, kernel_hashes: Mapping[str, str]) -> Toolchain:
        hk = device.hard_key("")
        return cls(hk.gpu_name, hk.cc, hk.sm_count, hk.dsl_version, hk.protocol_version,
                   tuple(sorted(kernel_hashes.items())))  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Toolchain:
        return cls(str(d["gpu_name"]), str(d["cc"]), int(d["sm_count"]), str(d["dsl_version"]),
                   int(d["protocol_version"]), tuple((str(a), str(b)) for a, b in d["kernels"]))  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kernels": [list(k) for k in self.kernels]}

    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.as_dict()).encode()).hexdigest()[:16]

    def describe(self) -> str:
        kernels = ", ".join(f"{name} {h[:8]}" for name, h in self.kernels)
        return f"{self.gpu_name} (cc {self.cc}, {self.sm_count} SMs, DSL {self.dsl_version}; {kernels})"


@dataclass(frozen=True)
class Budget:
    """A campaign's tuning budget per problem (None: the tuner's default)."""

    trials: int | None = None
    seconds: float | None = None
    exhaustive: bool = False

    def describe(self) -> str:
        if self.exhaustive:
            return "exhaustive" + (f", {self.seconds:g} s" if self.seconds else "")
        parts = ([f"{self.trials} trials"] if self.trials else []) + ([f"{self.seconds:g} s"] if self.seconds else [])
        return ", ".join(parts) or "default budget"


@dataclass(frozen=True)
class QueuedProblem:
    name: str
    problem: OpProblem
    order: int


@dataclass(frozen=True)
class Campaign:
    name: str
    budget: Budget
    max_retries: int
    problems: tuple[QueuedProblem, ...]


@dataclass(frozen=True)
class Claimant:
    """Who holds an item: host, process, and the GPU it times on (label and UUID)."""

    host: str
    pid: int
    gpu: str
    gpu_uuid: str | None = None

    @classmethod
    def here(cls, gpu: str, gpu_uuid: str | None = None) -> Claimant:
        return cls(socket.gethostname(), os.getpid(), gpu, gpu_uuid)

    def describe(self) -> str:
        return f"{self.host} GPU {self.gpu} (pid {self.pid})"


@dataclass(frozen=True)
class WorkItem:
    """A claimed problem of a campaign, for one toolchain."""

    campaign: str
    study_id: int
    trial_id: int
    name: str
    problem: OpProblem
    attempt: int
    """1 for the first try; a retry after a dead worker counts up."""
    token: str = ""
    """This claim's identity: an item given away meanwhile is no longer this claimer's to end."""


@dataclass(frozen=True)
class EnqueueStats:
    added: int
    already_queued: int


@dataclass(frozen=True)
class ItemStatus:
    """One problem's state for one toolchain; ``state`` is queued, running, done or failed."""

    name: str
    problem: str
    state: str
    attempts: int
    claimant: dict[str, Any] | None = None
    since: str | None = None
    outcome: dict[str, Any] | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ToolchainStatus:
    toolchain: Toolchain | None
    items: tuple[ItemStatus, ...]

    def count(self, state: str) -> int:
        return sum(1 for i in self.items if i.state == state)


@dataclass(frozen=True)
class CampaignStatus:
    name: str
    budget: Budget
    max_retries: int
    problems: int
    toolchains: tuple[ToolchainStatus, ...] = field(default_factory=tuple)

    @property
    def active(self) -> int:
        """Items queued or running, over every toolchain that started."""
        return sum(t.count("queued") + t.count("running") for t in self.toolchains)


# ---- the queue -------------------------------------------------------------------------------
def queue_url(url_or_path: str | os.PathLike[str]) -> str:
    """The SQLAlchemy URL of the queue of a tuning database (before the PostgreSQL schema option)."""
    loc = eng.resolve(url_or_path)
    if loc.sqlite_path is not None:
        return f"sqlite:///{loc.sqlite_path.with_name(loc.sqlite_path.name + QUEUE_SUFFIX)}"
    if loc.is_sqlite:
        raise DatabaseError(f"The tuning database {loc.display} has no file: a queue needs a SQLite file or "
                            "PostgreSQL.")  # fmt: skip
    return loc.url


def check_campaign_name(name: str) -> str:
    """``name`` if it can name a campaign (letters, digits, ``.``, ``_``, ``-``), else ValueError."""
    if not name or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        raise ValueError(f"campaign name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def _manifest_name(campaign: str) -> str:
    return f"{_STUDY_PREFIX}{check_campaign_name(campaign)}"


def _work_name(campaign: str, toolchain: Toolchain) -> str:
    return f"{_STUDY_PREFIX}{campaign}/{toolchain.digest()}"


def _campaign_of(study_name: str) -> str:
    return study_name[len(_STUDY_PREFIX) :].rsplit("/", 1)[0]


def _attempt(trial: FrozenTrial) -> int:
    """1 + the earlier attempts (``RetryHeartbeatStaleTrialCallback`` keeps them in ``retry_history``)."""
    return 1 + len(trial.system_attrs.get("retry_history", []))


class TuningQueue:
    """The queue of one tuning database; see the module docstring for the contract.

    ``heartbeat_s`` and ``grace_s`` must be the same for every process of a campaign (workers
    sweep each other's items with their own ``grace_s``). Safe to share between threads.
    """

    def __init__(
        self,
        url_or_path: str | os.PathLike[str],
        *,
        heartbeat_s: int = DEFAULT_HEARTBEAT_S,
        grace_s: int = DEFAULT_GRACE_S,
        timeouts: DbTimeouts | None = None,
        locks: LockSpace | None = None,
    ) -> None:
        if heartbeat_s < 1 or grace_s <= heartbeat_s:
            raise ValueError(f"need 1 <= heartbeat_s < grace_s, got {heartbeat_s} and {grace_s}")
        self._loc = eng.resolve(url_or_path)
        self.heartbeat_s = int(heartbeat_s)
        self.grace_s = int(grace_s)
        self._timeouts = timeouts
        self._locks = locks
        self._rdb: RDBStorage | None = None
        self._rdb_pid = -1
        self._lock = threading.RLock()
        self._max_retries: dict[str, int] = {}
        self._synced: dict[int, int] = {}  # work study id -> manifest size copied into it

    def __repr__(self) -> str:
        return f"TuningQueue({self._loc.display!r})"

    @property
    def display(self) -> str:
        """Where the queue is: the SQLite queue file, or the URL (password hidden)."""
        return self._loc.display + ("" if self._loc.sqlite_path is None else QUEUE_SUFFIX)

    @property
    def database(self) -> str:
        """The tuning database this queue belongs to (path or URL, password hidden)."""
        return self._loc.display

    @property
    def locks(self) -> LockSpace:
        """The lock space of the tuning database (``db.locks.locks_for``)."""
        if self._locks is None:
            self._locks = locks_for(self._loc.url, timeouts=self._timeouts)
        return self._locks

    # ---- plumbing ----------------------------------------------------------------------------
    def _guard(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except (optuna.exceptions.StorageInternalError, sa_exc.SQLAlchemyError) as e:
            cause = e.__cause__ if isinstance(e, optuna.exceptions.StorageInternalError) and e.__cause__ else e
            raise DatabaseError(f"The tuning queue {self.display} failed to {what}: {type(cause).__name__}: "
                                f"{str(cause).splitlines()[0] if str(cause) else ''}. Check that the database "
                                "is reachable and writable.") from e  # fmt: skip

    def _storage(self) -> RDBStorage:
        with self._lock:
            if self._rdb is None or self._rdb_pid != os.getpid():
                self._rdb = self._guard("open", self._open)
                self._rdb_pid = os.getpid()
            return self._rdb

    def _open(self) -> RDBStorage:
        url = queue_url(self._loc.url)
        sqlite = url.startswith("sqlite")
        if sqlite:
            kwargs: dict[str, Any] = {"connect_args": {"timeout": eng.SQLITE_BUSY_TIMEOUT_MS / 1000,
                                                       "check_same_thread": False}}  # fmt: skip
        else:
            if make_url(url).get_backend_name() != "postgresql":
                raise DatabaseError(f"The tuning database {self._loc.display}: a queue needs SQLite or PostgreSQL.")
            args = eng._pg_connect_args(url, read_only=False, timeouts=self._timeouts or DbTimeouts.from_env())
            args["options"] = f"{args.get('options', '')} -c search_path={QUEUE_SCHEMA}".strip()
            kwargs = {"pool_pre_ping": True, "connect_args": args}
            self._create_schema(url, args)
        # Table creation races between processes starting together: one at a time.
        with acquire(self.locks, "autocutlass:queue-tables"), warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = RDBStorage(url, engine_kwargs=kwargs, heartbeat_interval=self.heartbeat_s,
                                 grace_period=self.grace_s, heartbeat_stale_trial_callback=self._on_stale)  # fmt: skip
        if sqlite:
            _serialise_sqlite(storage)
        return storage

    @staticmethod
    def _create_schema(url: str, connect_args: dict[str, Any]) -> None:
        engine = create_engine(url, poolclass=NullPool, connect_args=connect_args)
        try:
            with engine.begin() as conn:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": 0x61637175})  # "acqu"
                conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {QUEUE_SCHEMA}")
        finally:
            engine.dispose()

    def _exists(self) -> bool:
        """Whether this database has a queue at all (checked without creating one)."""
        if self._rdb is not None:
            return True
        url = queue_url(self._loc.url)
        if url.startswith("sqlite"):
            return Path(make_url(url).database or "").is_file()
        args = eng._pg_connect_args(url, read_only=True, timeouts=self._timeouts or DbTimeouts.from_env())
        engine = create_engine(url, poolclass=NullPool, connect_args=args)
        try:
            with engine.connect() as conn:
                found = conn.execute(text("SELECT to_regclass(:t)"), {"t": f"{QUEUE_SCHEMA}.studies"}).scalar()
        finally:
            engine.dispose()
        return found is not None

    def _study_id(self, name: str) -> int | None:
        try:
            return self._storage().get_study_id_from_name(name)
        except KeyError:
            return None

    def _ensure_study(self, name: str) -> int:
        storage = self._storage()
        sid = self._study_id(name)
        if sid is None:
            try:
                sid = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], name)
            except optuna.exceptions.DuplicatedStudyError:
                sid = storage.get_study_id_from_name(name)
        return sid

    # ---- campaigns ---------------------------------------------------------------------------
    def enqueue(
        self,
        campaign: str,
        problems: Iterable[tuple[str, OpProblem]],
        *,
        budget: Budget | None = None,
        max_retries: int | None = None,
    ) -> EnqueueStats:
        """Add ``(name, problem)`` pairs to ``campaign`` (created if new); a problem already in
        it is skipped. ``budget`` and ``max_retries`` set the campaign's settings when given (a new
        campaign gets the defaults otherwise)."""
        return self._guard("enqueue", self._enqueue, campaign, list(problems), budget, max_retries)

    def _enqueue(self, campaign: str, problems: list[tuple[str, OpProblem]], budget: Budget | None,
                 max_retries: int | None) -> EnqueueStats:  # fmt: skip
        storage = self._storage()
        with acquire(self.locks, f"autocutlass:queue-enqueue:{campaign}"):
            sid = self._ensure_study(_manifest_name(campaign))
            attrs = storage.get_study_user_attrs(sid)
            fresh = {"budget": asdict(Budget()), "max_retries": DEFAULT_MAX_RETRIES, "created": _now()}
            settings = dict(attrs.get(_CAMPAIGN_ATTR) or fresh)
            if budget is not None:
                settings["budget"] = asdict(budget)
            if max_retries is not None:
                settings["max_retries"] = int(max_retries)
            if settings != attrs.get(_CAMPAIGN_ATTR):
                storage.set_study_user_attr(sid, _CAMPAIGN_ATTR, settings)
            order = sum(1 for k in attrs if k.startswith(_PROBLEM_ATTR))
            added = present = 0
            for name, problem in problems:
                key = _PROBLEM_ATTR + problem_id(problem)
                if key in attrs:
                    present += 1
                    continue
                entry = {"name": name, "problem": problem.as_dict(), "order": order, "enqueued": _now()}
                storage.set_study_user_attr(sid, key, entry)
                attrs[key] = entry
                order += 1
                added += 1
        self._max_retries.pop(campaign, None)
        return EnqueueStats(added, present)

    def campaign(self, campaign: str) -> Campaign | None:
        """The campaign's settings and problems, or None when nothing was ever enqueued in it."""
        return self._guard("read the campaign", self._campaign, campaign)

    def _campaign(self, campaign: str) -> Campaign | None:
        if not self._exists():
            return None
        sid = self._study_id(_manifest_name(campaign))
        if sid is None:
            return None
        return self._campaign_from_attrs(campaign, self._storage().get_study_user_attrs(sid))

    def _campaign_from_attrs(self, campaign: str, attrs: Mapping[str, Any]) -> Campaign:
        settings = attrs.get(_CAMPAIGN_ATTR) or {}
        b = settings.get("budget") or {}
        budget = Budget(b.get("trials"), b.get("seconds"), bool(b.get("exhaustive", False)))
        entries = sorted((v for k, v in attrs.items() if k.startswith(_PROBLEM_ATTR)), key=lambda v: v["order"])
        problems = tuple(QueuedProblem(e["name"], stored_problem(e["problem"], self.display), int(e["order"]))
                         for e in entries)  # fmt: skip
        return Campaign(campaign, budget, int(settings.get("max_retries", DEFAULT_MAX_RETRIES)), problems)

    def campaigns(self) -> list[str]:
        """Names of the campaigns in this queue."""

        def _names() -> list[str]:
            if not self._exists():
                return []
            names = [s.study_name for s in self._storage().get_all_studies()]
            return sorted(n.removeprefix(_STUDY_PREFIX) for n in names
                          if n.startswith(_STUDY_PREFIX) and "/" not in n.removeprefix(_STUDY_PREFIX))  # fmt: skip

        return self._guard("list campaigns", _names)

    # ---- workers -----------------------------------------------------------------------------
    def claim(self, campaign: str, toolchain: Toolchain, claimant: Claimant, *,
              skip: Collection[int] = ()) -> WorkItem | None:  # fmt: skip
        """The first queued problem of ``campaign`` for ``toolchain`` (largest first: see the
        module doc) whose item (``WorkItem.trial_id``) is not in ``skip``, now RUNNING under
        ``claimant``; None when none is queued (see ``active`` for running ones). Copies new
        problems of the manifest into the toolchain's items and re-queues stale items first."""
        return self._guard("claim a problem", self._claim, campaign, toolchain, claimant, skip)

    def _claim(self, campaign: str, toolchain: Toolchain, claimant: Claimant,
               skip: Collection[int] = ()) -> WorkItem | None:  # fmt: skip
        storage = self._storage()
        sid = self._sync(campaign, toolchain)
        if sid is None:
            return None
        self._sweep(sid)
        for t in storage.get_all_trials(sid, deepcopy=False, states=(TrialState.WAITING,)):
            tid = storage.get_trial_id_from_study_id_trial_number(sid, t.number)
            if tid in skip:
                continue
            storage.record_heartbeat(tid)  # first, so a claim cut short here still goes stale
            try:
                if not storage.set_trial_state_values(tid, TrialState.RUNNING):
                    continue
            except optuna.exceptions.UpdateFinishedTrialError:
                continue
            token = uuid.uuid4().hex
            storage.set_trial_user_attr(tid, "claimant", {**asdict(claimant), "since": _now(), "token": token})
            problem = stored_problem(t.user_attrs["problem"], self.display)
            return WorkItem(campaign, sid, tid, str(t.user_attrs["name"]), problem, _attempt(t), token)
        return None

    def _sync(self, campaign: str, toolchain: Toolchain) -> int | None:
        """The toolchain's study id, with every manifest problem copied in (None: no campaign)."""
        storage = self._storage()
        msid = self._study_id(_manifest_name(campaign))
        if msid is None:
            return None
        attrs = storage.get_study_user_attrs(msid)
        size = sum(1 for k in attrs if k.startswith(_PROBLEM_ATTR))
        name = _work_name(campaign, toolchain)
        sid = self._study_id(name)
        if sid is not None and self._synced.get(sid) == size:
            return sid
        with acquire(self.locks, f"autocutlass:queue-sync:{name}"):
            sid = self._ensure_study(name)
            if _TOOLCHAIN_ATTR not in storage.get_study_user_attrs(sid):
                storage.set_study_user_attr(sid, _TOOLCHAIN_ATTR, toolchain.as_dict())
            have = {t.user_attrs.get("problem_id") for t in storage.get_all_trials(sid, deepcopy=False)}
            new = [q for q in self._campaign_from_attrs(campaign, attrs).problems if problem_id(q.problem) not in have]
            for q in sorted(new, key=lambda q: -q.problem.flops):  # stable: enqueue order on ties
                pid = problem_id(q.problem)
                template = optuna.trial.create_trial(
                    state=TrialState.WAITING,
                    user_attrs={"problem_id": pid, "name": q.name, "problem": q.problem.as_dict()},
                )
                storage.create_new_trial(sid, template_trial=template)
                have.add(pid)
        self._synced[sid] = size
        return sid

    def _sweep(self, sid: int) -> None:
        """Fail the study's RUNNING items whose heartbeat is stale; ``_on_stale`` re-queues them."""
        storage = self._storage()
        study = optuna.load_study(study_name=storage.get_study_name_from_id(sid), storage=storage,
                                  sampler=optuna.samplers.RandomSampler())  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            fail_stale_trials(study)

    def _on_stale(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Optuna's callback for an item failed by the sweep: queue it again (within the retries)."""
        self._requeue(study, trial, f"no heartbeat for {self.grace_s} s")

    def _requeue(self, study: optuna.Study, trial: FrozenTrial, why: str) -> None:
        campaign = _campaign_of(study.study_name)
        retries = self._max_retries.get(campaign)
        if retries is None:
            found = self._campaign(campaign)
            retries = found.max_retries if found is not None else DEFAULT_MAX_RETRIES
            self._max_retries[campaign] = retries
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            RetryHeartbeatStaleTrialCallback(max_retry=retries)(study, trial)
        who = trial.user_attrs.get("claimant") or {}
        then = "queued again" if _attempt(trial) <= retries else "failed, no retries left"
        logger.warning("autocutlass: %s (attempt %d) lost its worker (%s GPU %s, pid %s: %s); %s",
                       trial.user_attrs.get("name"), _attempt(trial), who.get("host"), who.get("gpu"), who.get("pid"),
                       why, then)  # fmt: skip

    def active(self, campaign: str, toolchain: Toolchain) -> int:
        """Items of ``campaign`` for ``toolchain`` queued or running (manifest entries not copied
        yet count as queued)."""

        def _active() -> int:
            storage = self._storage()
            msid = self._study_id(_manifest_name(campaign))
            if msid is None:
                return 0
            sid = self._study_id(_work_name(campaign, toolchain))
            size = sum(1 for k in storage.get_study_user_attrs(msid) if k.startswith(_PROBLEM_ATTR))
            if sid is None:
                return size
            trials = storage.get_all_trials(sid, deepcopy=False)
            copied = len({t.user_attrs.get("problem_id") for t in trials})
            live = sum(1 for t in trials if t.state in (TrialState.WAITING, TrialState.RUNNING))
            return live + max(0, size - copied)

        return self._guard("count active problems", _active)

    def heartbeat(self, item: WorkItem) -> None:
        """Tell the queue ``item``'s worker is alive (at least every ``heartbeat_s`` seconds)."""
        self._guard("record a heartbeat", self._storage().record_heartbeat, item.trial_id)

    def complete(self, item: WorkItem, result: str, *, note: str | None = None, best_ms: float | None = None) -> bool:
        """End ``item`` as DONE: ``result`` is "tuned", "already tuned" or "skipped" (``note``
        says why or what). False when the item was no longer this worker's (failed by a sweep)."""
        outcome = {"result": result, "note": note, "best_ms": best_ms, "at": _now()}
        return self._finish(item, TrialState.COMPLETE, "outcome", outcome, [best_ms if best_ms is not None else 0.0])

    def fail(self, item: WorkItem, reason: str) -> bool:
        """End ``item`` as FAILED with ``reason``, without a retry (a failure that would repeat)."""
        return self._finish(item, TrialState.FAIL, "failure", reason, None)

    def _finish(self, item: WorkItem, state: TrialState, attr: str, value: Any, values: list[float] | None) -> bool:
        storage = self._storage()

        def _tx() -> bool:
            if not self._mine(item):
                return False
            try:
                storage.set_trial_user_attr(item.trial_id, attr, value)
                return bool(storage.set_trial_state_values(item.trial_id, state, values=values))
            except optuna.exceptions.UpdateFinishedTrialError:
                return False

        return self._guard("finish a problem", _tx)

    def _mine(self, item: WorkItem) -> bool:
        """Whether ``item`` is still RUNNING under this claim (not given away by a sweep or a
        release since). A check before the write, not a lock: the gap is one round trip."""
        t = self._storage().get_trial(item.trial_id)
        return t.state == TrialState.RUNNING and (t.user_attrs.get("claimant") or {}).get("token") == item.token

    def release(self, item: WorkItem, *, error: str | None = None) -> None:
        """Give ``item`` back. Without ``error`` it is queued again as it was (a worker stopping
        on request); with ``error`` the attempt counts as a retry, as a dead worker's does, and
        the error is kept for ``status``."""
        storage = self._storage()

        def _tx() -> None:
            if not self._mine(item):
                return
            try:
                if error is None:
                    storage.set_trial_state_values(item.trial_id, TrialState.WAITING)
                    return
                storage.set_trial_user_attr(item.trial_id, "last_error", error[-2000:])
                if storage.set_trial_state_values(item.trial_id, TrialState.FAIL):
                    study = optuna.load_study(study_name=storage.get_study_name_from_id(item.study_id), storage=storage,
                                              sampler=optuna.samplers.RandomSampler())  # fmt: skip
                    self._requeue(study, storage.get_trial(item.trial_id), error.strip().splitlines()[-1][:200])
            except optuna.exceptions.UpdateFinishedTrialError:
                pass

        self._guard("give a problem back", _tx)

    # ---- status ------------------------------------------------------------------------------
    def status(self, campaign: str) -> CampaignStatus | None:
        """Every toolchain's items of ``campaign``, one per problem (its latest attempt); None
        when the campaign does not exist. Reads only."""
        return self._guard("read the status", self._status, campaign)

    def _status(self, campaign: str) -> CampaignStatus | None:
        found = self._campaign(campaign)
        if found is None:
            return None
        storage = self._storage()
        prefix = _manifest_name(campaign) + "/"
        toolchains = []
        for study in storage.get_all_studies():
            if not study.study_name.startswith(prefix):
                continue
            raw = study.user_attrs.get(_TOOLCHAIN_ATTR)
            tc = Toolchain.from_dict(raw) if raw else None
            trials = storage.get_all_trials(storage.get_study_id_from_name(study.study_name), deepcopy=False)
            toolchains.append(ToolchainStatus(tc, tuple(_items(found, trials))))
        return CampaignStatus(campaign, found.budget, found.max_retries, len(found.problems), tuple(toolchains))


def _items(campaign: Campaign, trials: Sequence[FrozenTrial]) -> list[ItemStatus]:
    """One ``ItemStatus`` per manifest problem: its latest trial decides (none yet: queued)."""
    latest: dict[str, FrozenTrial] = {}
    attempts: dict[str, int] = {}
    for t in trials:
        pid = t.user_attrs.get("problem_id")
        attempts[pid] = attempts.get(pid, 0) + 1
        if pid not in latest or t.number > latest[pid].number:
            latest[pid] = t
    out = []
    for q in campaign.problems:
        pid = problem_id(q.problem)
        t = latest.get(pid)
        desc = q.problem.describe()
        if t is None:
            out.append(ItemStatus(q.name, desc, "queued", 0))
            continue
        who = t.user_attrs.get("claimant")
        n = attempts[pid]
        if t.state == TrialState.WAITING:
            out.append(ItemStatus(q.name, desc, "queued", n - 1, claimant=who))
        elif t.state == TrialState.RUNNING:
            out.append(ItemStatus(q.name, desc, "running", n, claimant=who, since=(who or {}).get("since")))
        elif t.state == TrialState.COMPLETE:
            out.append(ItemStatus(q.name, desc, "done", n, claimant=who, outcome=t.user_attrs.get("outcome")))
        else:
            out.append(ItemStatus(q.name, desc, "failed", n, claimant=who, reason=_failure_reason(t, n)))
    return out


def _failure_reason(t: FrozenTrial, attempts: int) -> str:
    if t.user_attrs.get("failure"):
        return str(t.user_attrs["failure"])
    who = t.user_attrs.get("claimant") or {}
    reason = (f"its worker stopped (died, hung or was cut off) on {attempts} attempt{'s' if attempts > 1 else ''}; "
              f"last on {who.get('host')} GPU {who.get('gpu')}")  # fmt: skip
    if t.user_attrs.get("last_error"):
        reason += f"; last error: {str(t.user_attrs['last_error']).strip().splitlines()[-1]}"
    return reason


def _serialise_sqlite(storage: RDBStorage) -> None:
    """Make every transaction of ``storage``'s SQLite engine start with BEGIN IMMEDIATE (and use
    WAL), so that Optuna's read-then-write claim cannot be interleaved by another process."""
    engine = storage.engine

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {eng.SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = FULL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections made before the listeners would not have them


def describe_time(iso: str | None, now: datetime | None = None) -> str:
    """``HH:MM:SS UTC (N min ago)`` of an ISO time written by the queue."""
    if not iso:
        return "?"
    t = datetime.fromisoformat(iso)
    ago = ((now or datetime.now(UTC)) - t).total_seconds()
    span = f"{ago:.0f} s" if ago < 120 else f"{ago / 60:.0f} min" if ago < 7200 else f"{ago / 3600:.1f} h"
    return f"{t:%H:%M:%S} UTC ({span} ago)"


__all__ = [
    "DEFAULT_CAMPAIGN",
    "DEFAULT_GRACE_S",
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_MAX_RETRIES",
    "QUEUE_SCHEMA",
    "QUEUE_SUFFIX",
    "Budget",
    "Campaign",
    "CampaignStatus",
    "Claimant",
    "EnqueueStats",
    "ItemStatus",
    "QueuedProblem",
    "Toolchain",
    "ToolchainStatus",
    "TuningQueue",
    "WorkItem",
    "check_campaign_name",
    "describe_time",
    "problem_id",
    "queue_url",
]
