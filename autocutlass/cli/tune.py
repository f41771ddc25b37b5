"""``autocutlass tune``: tune the problems of a shapes file, or the recorded misses, into the database.

    autocutlass tune --shapes FILE.json [--trials N] [--timeout S] [--exhaustive] [--only NAME]...
    autocutlass tune --pending [--trials N] [--timeout S] [--exhaustive]

``FILE.json`` has the format of the benchmark suite (``{"cases": [{"name", "M", "N", "K", "L"?,
"dtype", "layout"?}, ...]}``, see ``autocutlass.cli.shapes``). ``--pending`` tunes
the problems dispatch missed on this GPU that still have no best record. ``--timeout`` is per
problem. An interrupted run resumes where it stopped (finished trials are in the database).

One worker pipeline (compile children + one benchmark child on the GPU) serves every problem;
this process never touches the GPU itself. Output: progress on stderr (a bar on a terminal,
else a line every ``PROGRESS_EVERY`` trials: count, rate, failures, best so far), then a table on
stdout: per problem the best config, its TFLOP/s, torch.matmul's TFLOP/s measured in the same
run on the same inputs with the same timing protocol (in the finals' interleaved rounds when they
ran), the ratio, trials and wall time; ``--json`` rows also list the finalists and their times.

``add_tune_parser(subparsers)`` registers the command; its handler returns the exit code (0
success, 1 bad shapes file). Without a CUDA GPU, or on a GPU other than sm_90a, it raises a user
error (``NoGPU``, ``UsageError``: exit 2 through ``autocutlass.cli.main``) before tuning
anything; a ``DatabaseError`` propagates (exit 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna

from autocutlass.cli import common
from autocutlass.cli.common import Progress, UsageError, positive_float, positive_int, require_gpu
from autocutlass.cli.shapes import Case, load_cases
from autocutlass.db import TuningStore
from autocutlass.device import DeviceInfo
from autocutlass.errors import UnsupportedProblem
from autocutlass.kernels import families_for, family_names, get_family, unsupported_reason
from autocutlass.kernels.base import KernelFamily
from autocutlass.ops.base import OpProblem
from autocutlass.search.tuner import Evaluator, TuneProgress, TuneResult, tune_problem
from autocutlass.search.workers import CandidatePipeline
from autocutlass.settings import current

__all__ = ["add_tune_parser", "cmd_tune", "run_tune"]

PROGRESS_EVERY = 10
"""Off a terminal, a progress line every this many trials."""


def add_tune_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Register ``tune`` on ``subparsers``; returns its parser."""
    tune = subparsers.add_parser("tune", help="tune problems (a shapes file, or recorded misses) into the database")
    what = tune.add_mutually_exclusive_group(required=True)
    what.add_argument("--shapes", metavar="FILE.json", help="cases to tune, in the benchmark-suite format")
    what.add_argument("--pending", action="store_true", help="tune the problems dispatch missed on this GPU")
    tune.add_argument("--only", metavar="NAME", action="append", default=None,
                      help="with --shapes: only the case of this name (repeatable)")  # fmt: skip
    tune.add_argument("--trials", type=positive_int, default=None, metavar="N",
                      help="candidates to evaluate per problem (default 64 unless --timeout or --exhaustive)")  # fmt: skip
    tune.add_argument("--timeout", type=positive_float, default=None, metavar="S",
                      help="wall-clock seconds per problem")  # fmt: skip
    tune.add_argument("--exhaustive", action="store_true", help="evaluate every feasible config (grid, no early stop)")
    tune.add_argument("--no-resume", dest="resume", action="store_false",
                      help="evaluate again configs the database already has trials of")  # fmt: skip
    tune.add_argument("--family", default=None, help="kernel family (default: the first that supports the problem)")
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
    require_gpu("autocutlass tune")
    return run_tune(ns)


def run_tune(
    ns: argparse.Namespace,
    *,
    make_evaluator: EvaluatorFactory = _pipeline,
    store: TuningStore | None = None,
) -> int:
    """``autocutlass tune``; ``make_evaluator`` and ``store`` are seams for tests."""
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
        with Progress(unit="trial", every=PROGRESS_EVERY) as progress:
            reporter = _TuneReporter(progress)
            for case in cases:
                family = _family_for(case.problem, ns.family)
                if isinstance(family, str):
                    rows.append(_skipped_row(case, family))
                    continue
                hard_key = device.hard_key(family.source_hash())
                if hard_key.key() not in recorded:
                    store.record_device(hard_key, device.as_dict())
                    recorded.add(hard_key.key())
                evaluator = _evaluator(family.name, ns, evaluators, make_evaluator)
                reporter.start(case)
                try:
                    result = tune_problem(
                        case.problem, family, store, trials=ns.trials, seconds=ns.timeout,
                        exhaustive=ns.exhaustive, resume=ns.resume, progress=reporter,
                        evaluator=evaluator, hard_key=hard_key,
                    )  # fmt: skip
                except UnsupportedProblem as e:
                    rows.append(_skipped_row(case, str(e)))
                    continue
                finally:
                    progress.finish()
                rows.append(_row(case, family, result))
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
    name = ns.family or family_names()[0]
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
