"""``autocutlass tune``: tune the problems of a shapes file, or the recorded misses, into the database.

    autocutlass tune --shapes FILE.json [--trials N] [--timeout S] [--exhaustive] [--only NAME]...
    autocutlass tune --pending [--trials N] [--timeout S] [--exhaustive]

A campaign on a fleet (many GPUs and hosts, one database; ``autocutlass.campaign``)::

    autocutlass tune --shapes FILE.json --enqueue --db URL [--campaign C] [--trials N] [--max-retries N]
    autocutlass tune --pending --enqueue --db URL     (the misses dispatch recorded, on any GPU)
    autocutlass tune --worker --db URL [--campaign C] [--gpus 0,1]     (one per host: a lane per GPU)
    autocutlass tune --status --db URL [--campaign C] [--watch [S]]
    autocutlass tune --export-shipped DIR --db URL    (one SQLite file per GPU model)

``FILE.json`` has the format of the benchmark suite (``{"cases": [{"name", "M", "N", "K", "L"?,
"dtype", "layout"?}, ...]}``, see ``autocutlass.cli.shapes``). ``--pending`` tunes
the problems dispatch missed on this GPU that still have no best record. ``--timeout`` is per
problem. Each search starts from the databases' priors, as an on-line tuning does
(``LayeredStore.seed_configs`` over ``--db`` and the shipped databases: this GPU's record of the
problem or its nearest, a sibling GPU's record of it, the nearest tuned problems' winners;
``--no-priors``: the family's own seeds only); the JSON rows count them (``priors``). An
interrupted run resumes where it stopped (finished trials are in the database).

One worker pipeline (compile children + one benchmark child on the GPU) serves every problem;
this process never touches the GPU itself. Output: progress on stderr (a bar on a terminal,
else a line every ``PROGRESS_EVERY`` trials: count, rate, failures, best so far), then a table on
stdout: per problem the best config, its TFLOP/s, torch.matmul's TFLOP/s measured in the same
run on the same inputs with the same timing protocol (in the finals' interleaved rounds when they
ran), the ratio, trials and wall time; ``--json`` rows also list the finalists and their times.

``--enqueue`` puts the problems on the database's queue (``db.queue``; skipped: problems already
in the campaign, and problems no kernel family serves, said why) and needs no GPU; the budget
given with it is the campaign's. ``--worker`` takes problems until nothing is queued or running
for its GPUs; ``--status`` shows queued / running (host, GPU, since when) / done / failed per GPU
model, and with ``--watch`` a progress bar until the campaign is finished. Only ``--worker`` and
plain tuning need a GPU.

``add_tune_parser(subparsers)`` registers the command; its handler returns the exit code (0
success, 1 bad shapes file or a failed problem of a worker). Without a CUDA GPU, or on a GPU other
than sm_90a, it raises a user error (``NoGPU``, ``UsageError``: exit 2 through
``autocutlass.cli.main``) before tuning anything; a ``DatabaseError`` propagates (exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import optuna

from autocutlass.cli import common
from autocutlass.cli.common import (
    Progress,
    UsageError,
    positive_float,
    positive_int,
    require_gpu,
)
from autocutlass.cli.shapes import Case, load_cases
from autocutlass.cli.verdicts import ALL as VERDICTS_ALL
from autocutlass.cli.verdicts import refresh_verdicts
from autocutlass.db import TuningStore
from autocutlass.db.layered import LayeredStore
from autocutlass.db.queue import (
    DEFAULT_CAMPAIGN,
    DEFAULT_GRACE_S,
    DEFAULT_HEARTBEAT_S,
    Budget,
    CampaignStatus,
    ToolchainStatus,
    TuningQueue,
    check_campaign_name,
    describe_time,
)
from autocutlass.device import DeviceInfo
from autocutlass.errors import UnsupportedProblem
from autocutlass.kernels import (
    families_for,
    family_names,
    get_family,
    unsupported_reason,
)
from autocutlass.kernels.base import KernelFamily
from autocutlass.ops.base import OpProblem
from autocutlass.search.tuner import Evaluator, TuneProgress, TuneResult, tune_problem
from autocutlass.search.workers import CandidatePipeline
from autocutlass.settings import current

__all__ = ["add_tune_parser", "cmd_tune", "run_tune"]

PROGRESS_EVERY = 10
"""Off a terminal, a progress line every this many trials."""
WATCH_S = 10.0
"""Default seconds between two looks of ``--status --watch``."""
GRACE_PER_HEARTBEAT = DEFAULT_GRACE_S // DEFAULT_HEARTBEAT_S
"""``--heartbeat S`` sets the grace period (no heartbeat for that long: the worker is dead) to this many times S."""


def add_tune_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Register ``tune`` on ``subparsers``; returns its parser."""
    tune = subparsers.add_parser("tune", help="tune problems (a shapes file, or recorded misses) into the database")
    what = tune.add_mutually_exclusive_group(required=True)
    what.add_argument("--shapes", metavar="FILE.json", help="cases to tune, in the benchmark-suite format")
    what.add_argument("--pending", action="store_true", help="tune the problems dispatch missed on this GPU")
    what.add_argument("--worker", action="store_true",
                      help="take problems of a campaign from the database's queue until none is left "
                           "(one lane per GPU)")  # fmt: skip
    what.add_argument("--status", action="store_true", help="show a campaign: queued, running, done, failed")
    what.add_argument("--export-shipped", metavar="DIR", default=None,
                      help="write one SQLite database per GPU model into DIR (the shipped-database layout)")
    what.add_argument("--verdicts", nargs="?", const=VERDICTS_ALL, default=None, metavar="FILE.json",
                      help="re-time this GPU's stored winners of --db (of FILE's cases, with --only) against torch in "
                           "the finals and record their vendor verdicts with host times; no search")  # fmt: skip
    tune.add_argument("--enqueue", action="store_true",
                      help="with --shapes or --pending: put the problems on the queue of --db instead of tuning here")
    tune.add_argument("--campaign", default=DEFAULT_CAMPAIGN, metavar="NAME", type=_campaign_name,
                      help=f"campaign of --enqueue/--worker/--status (default {DEFAULT_CAMPAIGN!r})")
    tune.add_argument("--max-retries", type=positive_int, default=None, metavar="N",
                      help="with --enqueue: times a problem whose worker died is queued again (default 2)")
    tune.add_argument("--gpus", default=None, metavar="LIST",
                      help="with --worker: GPUs to use, as CUDA_VISIBLE_DEVICES (default: every visible GPU)")
    tune.add_argument("--watch", nargs="?", type=positive_float, const=WATCH_S, default=None, metavar="S",
                      help=f"with --status: a progress bar, refreshed every S seconds ({WATCH_S:g}), until done")
    tune.add_argument("--heartbeat", type=positive_int, default=DEFAULT_HEARTBEAT_S, metavar="S",
                      help=f"with --worker: seconds between heartbeats (default {DEFAULT_HEARTBEAT_S}); a worker "
                           f"silent for {GRACE_PER_HEARTBEAT}x that is taken for dead. Use one value per campaign")
    tune.add_argument("--only", metavar="NAME", action="append", default=None,
                      help="with --shapes: only the case of this name (repeatable); conv cases: NAME/dgrad, "
                           "NAME/wgrad for one direction, '*/fprop' (or dgrad, wgrad) for that direction of every case")  # fmt: skip
    tune.add_argument("--trials", type=positive_int, default=None, metavar="N",
                      help="candidates to evaluate per problem (default 64 unless --timeout or --exhaustive)")  # fmt: skip
    tune.add_argument("--timeout", type=positive_float, default=None, metavar="S",
                      help="wall-clock seconds per problem")  # fmt: skip
    tune.add_argument("--exhaustive", action="store_true", help="evaluate every feasible config (grid, no early stop)")
    tune.add_argument("--no-resume", dest="resume", action="store_false",
                      help="evaluate again configs the database already has trials of")  # fmt: skip
    tune.add_argument("--family", default=None,
                      help="kernel family (default: the first that serves the problem); 'all': every family that "
                           "serves it, each with the whole budget (here only, not with --enqueue / --worker)")  # fmt: skip
    tune.add_argument("--no-priors", dest="priors", action="store_false",
                      help="start the search from the family's own seeds only, not from the databases' priors "
                           "(this GPU's nearest record, a sibling GPU's record of the problem, the nearest tuned "
                           "problems' winners; read from --db and the shipped databases)")  # fmt: skip
    tune.add_argument("--compile-workers", type=positive_int, default=None, metavar="N",
                      help="parallel compile processes (default: spare cores, at most 6)")  # fmt: skip
    tune.add_argument("--db", metavar="URL", default=None, help="database file or SQLAlchemy URL (default: AUTOCUTLASS_DB)")
    tune.add_argument("--json", metavar="FILE", default=None, help="also write the results table as JSON")
    tune.set_defaults(func=cmd_tune)
    return tune


# ---- the command -------------------------------------------------------------------------------
EvaluatorFactory = Callable[[str, argparse.Namespace], Any]
"""(family name, namespace) -> a context manager yielding an ``Evaluator``; a seam for tests."""


def _pipeline(family_name: str, ns: argparse.Namespace) -> CandidatePipeline:
    return CandidatePipeline(family_name, compile_workers=ns.compile_workers)


def cmd_tune(ns: argparse.Namespace) -> int:
    _check_modes(ns)
    if (ns.pending or ns.shapes or ns.worker or ns.verdicts) and not ns.enqueue:
        require_gpu("autocutlass tune" + (" --worker" if ns.worker else " --verdicts" if ns.verdicts else ""))
    return run_tune(ns)


def _check_modes(ns: argparse.Namespace) -> None:
    if ns.enqueue and not (ns.shapes or ns.pending):
        raise UsageError("--enqueue goes with --shapes FILE or --pending")
    if ns.only and not (ns.shapes or ns.verdicts not in (None, VERDICTS_ALL)):
        raise UsageError("--only goes with --shapes FILE or --verdicts FILE")
    if ns.watch is not None and not ns.status:
        raise UsageError("--watch goes with --status")
    if ns.gpus is not None and not ns.worker:
        raise UsageError("--gpus goes with --worker")
    if ns.max_retries is not None and not ns.enqueue:
        raise UsageError("--max-retries goes with --enqueue (it is the campaign's)")
    if ns.family == ALL_FAMILIES and (ns.enqueue or ns.worker):
        raise UsageError("--family all tunes here only: a campaign tunes each problem under one family (name it, or "
                         "leave it out for the first that serves the problem)")  # fmt: skip


def run_tune(
    ns: argparse.Namespace,
    *,
    make_evaluator: EvaluatorFactory = _pipeline,
    store: TuningStore | None = None,
    queue: TuningQueue | None = None,
    worker_seams: dict[str, Any] | None = None,
) -> int:
    """``autocutlass tune``; ``make_evaluator``, ``store``, ``queue`` and ``worker_seams`` (keyword
    arguments of ``campaign.run_worker``: ``make_lane``, ``families``, ``gpu_locks``, and ``gpus``)
    are seams for tests."""
    _check_modes(ns)
    if ns.enqueue or ns.worker or ns.status or ns.export_shipped:
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # the queue's studies: "study created" is noise
        db = ns.db or current().db_url
        store = store if store is not None else TuningStore(db)
        if ns.export_shipped:
            return _export_shipped(ns, store)
        queue = queue if queue is not None else TuningQueue(db, heartbeat_s=ns.heartbeat,
                                                            grace_s=GRACE_PER_HEARTBEAT * ns.heartbeat)  # fmt: skip
        if ns.enqueue:
            return _enqueue(ns, store, queue)
        if ns.status:
            return _status(ns, queue)
        return _worker(ns, store, queue, dict(worker_seams or {}))
    if ns.verdicts is not None:
        return _verdicts(ns, make_evaluator, store)
    try:
        cases = load_cases(ns.shapes, ns.only) if ns.shapes else None
    except ValueError as e:
        print(f"autocutlass: error: {e}", file=sys.stderr)
        return 1
    if store is None:
        store = TuningStore(ns.db or current().db_url)
    rows: list[dict[str, Any]] = []
    evaluators: dict[str, tuple[Any, Evaluator]] = {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # one "study created" line per problem is noise
    try:
        device = _device(ns, evaluators, make_evaluator)
        if cases is None:
            cases = _pending_cases(store, device)
            if not cases:
                print(f"no pending misses for {device.gpu_name} in {store.display}")
                return 0
        recorded: set[str] = set()
        priors = LayeredStore(store, current().shipped_dbs_dir) if ns.priors else None
        gpu_lock = _gpu_lock(make_evaluator is _pipeline)
        with Progress(unit="trial", every=PROGRESS_EVERY) as progress:
            reporter = _TuneReporter(progress)
            for case, family in ((c, f) for c in cases for f in _families_for(c.problem, ns.family)):
                if isinstance(family, str):
                    rows.append(_skipped_row(case, family))
                    continue
                hard_key = device.hard_key(family.source_hash())
                if hard_key.key() not in recorded:
                    store.record_device(hard_key, device.as_dict())
                    recorded.add(hard_key.key())
                evaluator = _evaluator(family.name, ns, evaluators, make_evaluator)
                seeds = priors.seed_configs(case.problem, hard_key, family.name) if priors else []
                reporter.start(case)
                try:
                    with gpu_lock():
                        result = tune_problem(
                            case.problem, family, store, trials=ns.trials, seconds=ns.timeout,
                            exhaustive=ns.exhaustive, resume=ns.resume, progress=reporter,
                            evaluator=evaluator, hard_key=hard_key, seeds=seeds,
                        )  # fmt: skip
                except UnsupportedProblem as e:
                    rows.append(_skipped_row(case, str(e)))
                    continue
                finally:
                    progress.finish()
                rows.append({**_row(case, family, result), "priors": len(seeds)})
    except KeyboardInterrupt:
        print("\ninterrupted; finished trials are recorded, run the same command again to resume", file=sys.stderr)
        raise
    finally:
        for cm, _ in evaluators.values():
            cm.__exit__(None, None, None)
    print_table(rows, title=f"tuned on {device.gpu_name} into {store.display}")
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=2, sort_keys=True) + "\n")
    return 0


def _verdicts(ns: argparse.Namespace, make_evaluator: EvaluatorFactory, store: TuningStore | None) -> int:
    """``--verdicts``: ``cli.verdicts.refresh_verdicts`` with this command's evaluators and GPU lock."""
    store = store if store is not None else TuningStore(ns.db or current().db_url)
    evaluators: dict[str, tuple[Any, Evaluator]] = {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        device = _device(ns, evaluators, make_evaluator)
        return refresh_verdicts(ns, store, device, lambda name: _evaluator(name, ns, evaluators, make_evaluator),
                                _gpu_lock(make_evaluator is _pipeline))  # fmt: skip
    finally:
        for cm, _ in evaluators.values():
            cm.__exit__(None, None, None)


def _campaign_name(text: str) -> str:
    """argparse type of ``--campaign``."""
    try:
        return check_campaign_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _gpu_lock(real: bool) -> Callable[[], Any]:
    """A context manager factory holding the host's lock of the GPU the benchmark child runs on
    (the first visible one) while a problem is timed, so that a campaign worker or another
    ``tune`` on that GPU does not time candidates at the same time (``db.locks.host_gpu_locks``).
    A no-op for a test evaluator (``real`` False) or when no GPU can be named."""
    from autocutlass.campaign.gpus import visible_gpus
    from autocutlass.db.locks import acquire, gpu_lock_name, host_gpu_locks

    gpus = visible_gpus() if real else []
    if not gpus:
        return contextlib.nullcontext
    name = gpu_lock_name(gpus[0].lock_id())

    def _waiting() -> None:
        print(f"waiting for GPU {gpus[0].label()}: another process times candidates on it", file=sys.stderr)

    @contextlib.contextmanager
    def _held() -> Iterator[None]:
        lock = acquire(host_gpu_locks(), name, on_wait=_waiting)
        assert lock is not None
        with lock:
            yield

    return _held


def _evaluator(family_name: str, ns: argparse.Namespace, evaluators: dict[str, tuple[Any, Evaluator]],
               make_evaluator: EvaluatorFactory) -> Evaluator:  # fmt: skip
    """The evaluator of ``family_name``, entered on first use; ``evaluators`` keeps (manager, evaluator)."""
    if family_name not in evaluators:
        cm = make_evaluator(family_name, ns)
        evaluators[family_name] = (cm, cm.__enter__())
    return evaluators[family_name][1]


def _device(ns: argparse.Namespace, evaluators: dict[str, tuple[Any, Evaluator]],
            make_evaluator: EvaluatorFactory) -> DeviceInfo:  # fmt: skip
    """The GPU the benchmark child runs on, as it reports it; a user error unless it is sm_90a."""
    name = ns.family if ns.family not in (None, ALL_FAMILIES) else family_names()[0]
    device = DeviceInfo(**_evaluator(name, ns, evaluators, make_evaluator).device()["device"])
    if device.cc != "9.0":
        raise UsageError(f"autocutlass tune needs an sm_90a GPU (H100/H200); {device.gpu_name} is compute "
                         f"capability {device.cc}")  # fmt: skip
    return device


def _pending_cases(store: TuningStore, device: DeviceInfo) -> list[Case]:
    """The problems dispatch missed on this GPU (under any kernel family's hard key) that still
    have no best record there, most-missed first, each once."""
    seen: set[str] = set()
    cases: list[Case] = []
    for name in family_names():
        for problem in store.pending_misses(device.hard_key(get_family(name).source_hash())):
            if problem.key() not in seen:
                seen.add(problem.key())
                cases.append(Case(f"pending{len(cases)}", problem))
    return cases


ALL_FAMILIES = "all"
"""``--family all``: tune a problem under every family that serves it (records of each; the faster
serves, ``dispatch``): a decode GEMM under hopper_gemm and hopper_gemv."""


def _families_for(problem: OpProblem, name: str | None) -> list[KernelFamily[Any] | str]:
    """The families to tune ``problem`` with (``_family_for``'s one, or with ``--family all`` each that
    serves it), or the reason there is none."""
    if name != ALL_FAMILIES:
        return [_family_for(problem, name)]
    return list(families_for(problem)) or [f"no kernel family serves it ({unsupported_reason(problem)})"]


def _family_for(problem: OpProblem, name: str | None) -> KernelFamily[Any] | str:
    """The family to tune ``problem`` with, or the reason there is none."""
    if name is not None:
        if name not in family_names():
            raise UsageError(f"--family {name}: no such kernel family; known: {', '.join(family_names())}")
        fam = get_family(name)
        why = fam.supports(problem)
        return fam if why is None else f"{name}: {why}"
    families = families_for(problem)
    if families:
        return families[0]
    return f"no kernel family serves it ({unsupported_reason(problem)})"


# ---- output ------------------------------------------------------------------------------------
def _config_label(family: KernelFamily[Any], config: dict[str, Any]) -> str:
    cfg = family.config_from_dict(config)
    short = getattr(cfg, "short", None)
    return short() if callable(short) else " ".join(f"{k}={v}" for k, v in sorted(config.items()))


def _row(case: Case, family: KernelFamily[Any], r: TuneResult) -> dict[str, Any]:
    failed = sum(n for s, n in r.states.items() if s != "ok")
    return {
        "name": case.name,
        "problem": case.problem.describe(),
        "family": family.name,
        "config": r.best_config,
        "config_label": _config_label(family, r.best_config) if r.best_config else "none found",
        "median_ms": r.best.timing.median_ms if r.best and r.best.timing else None,
        "tflops": r.best_tflops,
        "torch_tflops": r.torch_tflops,
        "vs_torch": r.vs_torch,
        "trials": r.evaluated,
        "failed": failed,
        "states": dict(r.states),
        "finals": [{"config_label": _config_label(family, c), "median_ms": t.median_ms} for c, t in r.finals],
        "strategy": r.strategy,
        "stop": r.stop_reason,
        "wall_s": r.wall_s,
        "note": None,
    }


def _skipped_row(case: Case, why: str) -> dict[str, Any]:
    return {"name": case.name, "problem": case.problem.describe(), "family": None, "config": None,
            "config_label": "skipped", "median_ms": None, "tflops": None, "torch_tflops": None, "vs_torch": None,
            "trials": 0, "failed": 0, "states": {}, "finals": [], "strategy": None, "stop": None, "wall_s": 0.0, "note": why}  # fmt: skip


_HEADERS = ("case", "problem", "best config", "TFLOP/s", "torch TFLOP/s", "x torch", "trials", "wall s")


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table_rows(rows: Sequence[dict[str, Any]]) -> list[tuple[str, ...]]:
    out = []
    for r in rows:
        trials = str(r["trials"]) + (f" ({r['failed']} failed)" if r["failed"] else "")
        out.append((
            r["name"], r["problem"], r["config_label"], _fmt(r["tflops"], ".1f"), _fmt(r["torch_tflops"], ".1f"),
            _fmt(r["vs_torch"], ".3f"), trials, _fmt(r["wall_s"], ".0f"),
        ))  # fmt: skip
    return out


def print_table(rows: Sequence[dict[str, Any]], *, title: str) -> None:
    common.print_table(title, _HEADERS, table_rows(rows), right=lambda i: 3 <= i <= 7)
    for r in rows:
        if r.get("note"):
            print(f"{r['name']}: {r['note']}")


class _TuneReporter:
    """``tune_problem``'s progress callback, shown through a ``Progress``: trials evaluated of
    those planned, failures so far and the best TFLOP/s, one task per case."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._failed = 0

    def start(self, case: Case) -> None:
        self._failed = 0
        self._progress.start(case.name)

    def __call__(self, p: TuneProgress) -> None:
        if not p.last.earlier and not p.last.ok:
            self._failed += 1
        best = p.best.timing.tflops(p.problem.flops) if p.best and p.best.timing else None
        note = f"best {best:.1f} TFLOP/s" if best else "no result yet"
        self._progress.update(p.evaluated, total=p.planned, failed=self._failed, note=note)


# ---- campaigns on a fleet ----------------------------------------------------------------------
def _enqueue(ns: argparse.Namespace, store: TuningStore, queue: TuningQueue) -> int:
    """``--shapes FILE --enqueue`` / ``--pending --enqueue``: problems onto the campaign's queue."""
    if ns.shapes:
        try:
            cases = load_cases(ns.shapes, ns.only)
        except ValueError as e:
            print(f"autocutlass: error: {e}", file=sys.stderr)
            return 1
    else:
        cases = [Case(f"pending{i}", p) for i, p in enumerate(store.pending_misses())]
    served, unserved = [], []
    for case in cases:
        family = _family_for(case.problem, ns.family)
        (unserved if isinstance(family, str) else served).append((case, family))
    budget = None
    if ns.trials is not None or ns.timeout is not None or ns.exhaustive:
        budget = Budget(ns.trials, ns.timeout, ns.exhaustive)
    stats = queue.enqueue(ns.campaign, [(c.name, c.problem) for c, _ in served], budget=budget,
                          max_retries=ns.max_retries)  # fmt: skip
    found = queue.campaign(ns.campaign)
    assert found is not None
    print(f"campaign {ns.campaign!r} in {queue.database}: {stats.added} problems enqueued, {stats.already_queued} "
          f"already queued; {len(found.problems)} in all; budget {found.budget.describe()}, "
          f"{found.max_retries} retries after a worker dies")  # fmt: skip
    for case, why in unserved:
        print(f"{case.name}: not enqueued: {why}")
    print(f"start one worker per GPU host: autocutlass tune --worker --db {store.display}"
          + (f" --campaign {ns.campaign}" if ns.campaign != DEFAULT_CAMPAIGN else ""))
    return 0


def _worker(ns: argparse.Namespace, store: TuningStore, queue: TuningQueue, seams: dict[str, Any]) -> int:
    """``--worker``: this host's lanes on the campaign until nothing is left (``campaign.run_worker``)."""
    from autocutlass.campaign import (
        NoSuchCampaign,
        PipelineLanes,
        RegistryFamilies,
        WorkerOptions,
        run_worker,
    )
    from autocutlass.campaign.gpus import visible_gpus

    gpus = seams.pop("gpus", None)
    if gpus is None:
        gpus = visible_gpus(ns.gpus)
    if not gpus:
        raise UsageError("autocutlass tune --worker: no GPU to work on (CUDA_VISIBLE_DEVICES / --gpus select none)")
    try:
        families = seams.pop("families", None) or RegistryFamilies(ns.family)
    except KeyError as e:
        raise UsageError(f"--family: {e.args[0]}") from None
    options = WorkerOptions(ns.campaign, trials=ns.trials, seconds=ns.timeout, exhaustive=ns.exhaustive or None,
                            resume=ns.resume, priors=ns.priors)  # fmt: skip
    given = seams.pop("make_lane", None)
    lanes: Any = (contextlib.nullcontext(given) if given
                  else PipelineLanes(len(gpus), compile_workers=ns.compile_workers))  # fmt: skip

    t0 = time.monotonic()

    def say(text: str) -> None:  # the seconds since the start: where a campaign's time goes
        print(f"[{time.monotonic() - t0:6.1f} s] {text}", file=sys.stderr, flush=True)

    t0 = time.monotonic()
    with lanes as make_lane, _sigterm_interrupts():
        try:
            reports = run_worker(queue, store, gpus, make_lane=make_lane, families=families, options=options,
                                 say=say, **seams)  # fmt: skip
        except NoSuchCampaign as e:
            raise UsageError(str(e)) from None
    rows = []
    for r in reports:
        case = Case(r.name, r.problem)
        family = families.for_problem(r.problem) if r.family else None
        if r.tune is not None and r.tune.best is not None and not isinstance(family, (str, type(None))):
            row = _row(case, family, r.tune)
            row["note"] = r.note if r.result != "tuned" else None
            rows.append(row)
        else:
            rows.append(_skipped_row(case, f"{r.result}" + (f": {r.note}" if r.note else "")))
    if rows:
        print_table(rows, title=f"worker on {', '.join(g.label() for g in gpus)} into {store.display}: "
                               f"{len(rows)} problems in {time.monotonic() - t0:.0f} s")  # fmt: skip
    else:
        print(f"nothing to do in campaign {ns.campaign!r} for these GPUs")
    return 1 if any(r.result == "failed" for r in reports) else 0


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM acts as Ctrl-C (the worker gives its problems back) while the block runs."""

    def _raise(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        before = signal.signal(signal.SIGTERM, _raise)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _status(ns: argparse.Namespace, queue: TuningQueue) -> int:
    """``--status [--watch S]``."""
    st = queue.status(ns.campaign)
    if st is None:
        known = queue.campaigns()
        there = f"; campaigns there: {', '.join(known)}" if known else "; nothing was enqueued there"
        raise UsageError(f"no campaign {ns.campaign!r} in {queue.database}{there}")
    if ns.watch is not None:
        st = _watch(ns, queue, st)
    print_status(st, queue.database)
    return 0


def _watch(ns: argparse.Namespace, queue: TuningQueue, st: CampaignStatus) -> CampaignStatus:
    """Problems finished of all (over every GPU model that started) until none is queued or
    running: a bar on a terminal, else a line whenever the counts change; the last status."""
    bar: Any = None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichProgress

        bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           TextColumn("{task.fields[status]}"), console=Console(stderr=True))  # fmt: skip
    with bar if bar is not None else contextlib.nullcontext():
        task = bar.add_task(f"campaign {ns.campaign}", total=None, status="") if bar is not None else None
        last = None
        while True:
            total = st.problems * max(1, len(st.toolchains))
            finished = sum(t.count("done") + t.count("failed") for t in st.toolchains)
            failed = sum(t.count("failed") for t in st.toolchains)
            running = sum(t.count("running") for t in st.toolchains)
            note = (f"{failed} failed, {running} running, {total - finished - running} queued" if st.toolchains
                    else "no worker has started")  # fmt: skip
            if bar is not None:
                bar.update(task, completed=finished, total=total, status=note)
            elif (finished, note) != last:
                line = f"campaign {ns.campaign}: {finished}/{total} problems finished, {note}"
                print(line, file=sys.stderr, flush=True)
                last = (finished, note)
            if st.toolchains and st.active == 0:
                return st
            time.sleep(ns.watch)
            fresh = queue.status(ns.campaign)
            assert fresh is not None
            st = fresh


def status_lines(st: CampaignStatus, where: str) -> list[str]:
    """``--status`` as text lines."""
    head = (f"campaign {st.name!r} in {where}: {st.problems} problems; budget {st.budget.describe()}, "
            f"{st.max_retries} retries after a worker dies")  # fmt: skip
    lines = [head]
    if not st.toolchains:
        lines.append(f"  no worker has started: {st.problems} queued")
    for tc in st.toolchains:
        lines.extend(_toolchain_lines(tc))
    return lines


def _toolchain_lines(tc: ToolchainStatus) -> list[str]:
    done = [i for i in tc.items if i.state == "done"]
    kinds: dict[str, int] = {}
    for i in done:
        kind = (i.outcome or {}).get("result", "done")
        kinds[kind] = kinds.get(kind, 0) + 1
    detail = f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})" if kinds else ""
    name = tc.toolchain.describe() if tc.toolchain else "?"
    counts = (f"  done {len(done)}{detail}, running {tc.count('running')}, queued {tc.count('queued')}, "
              f"failed {tc.count('failed')}")  # fmt: skip
    lines = [f"{name}:", counts]
    for i in tc.items:
        who = i.claimant or {}
        if i.state == "running":
            retry = f", attempt {i.attempts}" if i.attempts > 1 else ""
            lines.append(f"  running  {i.name}  {i.problem}  on {who.get('host')} GPU {who.get('gpu')} "
                         f"(pid {who.get('pid')}) since {describe_time(i.since)}{retry}")  # fmt: skip
        elif i.state == "failed":
            lines.append(f"  failed   {i.name}  {i.problem}: {i.reason}")
        elif i.state == "queued" and i.attempts:
            lines.append(f"  queued   {i.name}  {i.problem}: attempt {i.attempts + 1}, the last one's worker "
                         f"({who.get('host')} GPU {who.get('gpu')}) stopped")  # fmt: skip
        elif i.state == "done" and (i.outcome or {}).get("result") == "skipped":
            lines.append(f"  skipped  {i.name}  {i.problem}: {(i.outcome or {}).get('note')}")
    return lines


def print_status(st: CampaignStatus, where: str) -> None:
    for line in status_lines(st, where):
        print(line)


def _export_shipped(ns: argparse.Namespace, store: TuningStore) -> int:
    """``--export-shipped DIR``: a SQLite file per GPU model (``db.transfer.export_per_gpu``)."""
    from autocutlass.db.transfer import export_per_gpu

    written = export_per_gpu(store, ns.export_shipped)
    if not written:
        print(f"{store.display} has no best records: nothing exported")
        return 0
    for gpu, path in written.items():
        print(f"{gpu}: {path}")
    return 0
