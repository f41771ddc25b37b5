"""Probe: a tuning campaign on every GPU of one host, against the same campaign on one GPU.

Issue 23. On a host with several GPUs (the device tool's ``nvidia-h200-x2`` and up), with a local
PostgreSQL started for the run (``queue_gpu_run.LocalPostgres``; ``--pg-bin`` or
``$AUTOCUTLASS_PG_BIN`` names its binaries when it is not under /usr/lib/postgresql):

* ``--phase speed`` (one command): the same campaign (``--speed-cases`` of the GEMM suite and of the
  conv suite, ``--speed-trials`` each) is enqueued into two fresh databases and run by one
  ``autocutlass tune --worker`` with ``--gpus 0`` and then with every GPU, each with an empty
  kernel cache (so both compile everything). Reported: the wall times and the speed-up, every
  problem done exactly once, no config timed twice for a problem, the winners of the many-GPU run
  against the one-GPU run's (ratio of best times per problem), and, per GPU, that no two problems'
  timing intervals overlapped (from the queue: each item's claim time and completion time).
* ``--phase kill`` (another command): a campaign (``--kill-cases``, ``--kill-trials``) on every GPU;
  once the worker has recorded trials, one of its benchmark children (a child with a non-empty
  ``CUDA_VISIBLE_DEVICES``) is SIGKILLed; after ``--kill-worker-after`` more problems are done the
  whole worker is SIGKILLed and a new worker is started, which re-queues the dead worker's problems
  after the grace period (6 heartbeats). Checked: every problem done exactly once (the killed
  worker's problems on a second attempt), no config timed twice, one best record per problem,
  no GPU timed two problems at once. ``--export DIR`` writes the shipped-database layout of the
  result (``tune --export-shipped``).

Everything goes to ``--out`` (logs, ``<phase>.json``). Run from the repository root on the GPU
machine: ``python benchmarks/probes/multigpu_campaign.py --phase speed --out $OUT``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import itertools

from queue_gpu_run import LocalPostgres, autocutlass, env_for, log, start

CLOCK_SLACK_S = 1.0
"""Claim times are stored to the second: an interval may seem to begin up to this early."""

GEMM_SUITE = ROOT / "benchmarks" / "shapes.json"
CONV_SUITE = ROOT / "benchmarks" / "shapes-conv.json"


def gpu_count() -> int:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def case_names(path: Path, n: int) -> list[str]:
    from autocutlass.cli.shapes import load_cases

    names = [c.name for c in load_cases(str(path))]
    return names[:n] if n >= 0 else names


def enqueue(db: str, env: dict[str, str], suites: list[tuple[Path, list[str]]], trials: int, log_to: Path) -> float:
    t0 = time.monotonic()
    for path, names in suites:
        if not names:
            continue
        only = [a for name in names for a in ("--only", name)]
        rc, _ = autocutlass(["tune", "--shapes", str(path), *only, "--enqueue", "--trials", str(trials), "--db", db],
                            env, timeout=180, log_to=log_to)  # fmt: skip
        if rc != 0:
            raise SystemExit(f"enqueue of {path.name} failed ({rc}); see {log_to}")
    return time.monotonic() - t0


# ---- what the queue and the store say ------------------------------------------------------------
def queue_items(db: str, heartbeat: float) -> list[dict[str, Any]]:
    """Every item of the default campaign: name, state, attempts, GPU, claim and completion times."""
    import optuna

    from autocutlass.db.queue import TuningQueue

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    queue = TuningQueue(db, heartbeat_s=heartbeat, grace_s=6 * heartbeat)
    st = queue.status("default")
    storage = queue._storage()  # the item trials' completion times are Optuna's
    done_at: dict[str, dt.datetime | None] = {}
    for study in storage.get_all_studies():
        sid = storage.get_study_id_from_name(study.study_name)
        for t in storage.get_all_trials(sid, deepcopy=False):
            name = t.user_attrs.get("name")
            if name is not None and t.datetime_complete is not None:
                done_at[str(name)] = t.datetime_complete
    out = []
    for tc in st.toolchains if st else ():
        for i in tc.items:
            who = i.claimant or {}
            out.append({"name": i.name, "state": i.state, "attempts": i.attempts, "gpu": who.get("gpu"),
                        "gpu_uuid": who.get("gpu_uuid"), "pid": who.get("pid"), "since": who.get("since"),
                        "done": done_at[i.name].isoformat() if done_at.get(i.name) else None,
                        "outcome": (i.outcome or {}).get("result")})  # fmt: skip
    return out


def _when(text: str | None) -> float | None:
    if not text:
        return None
    t = dt.datetime.fromisoformat(text)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


def overlaps(items: list[dict[str, Any]]) -> list[str]:
    """Pairs of done items on one GPU whose [claimed, completed] intervals overlap."""
    by_gpu: dict[str, list[tuple[float, float, str]]] = {}
    for i in items:
        a, b = _when(i["since"]), _when(i["done"])
        if a is not None and b is not None and i["state"] == "done":
            by_gpu.setdefault(str(i["gpu_uuid"] or i["gpu"]), []).append((a, b, i["name"]))
    bad = []
    for gpu, spans in by_gpu.items():
        spans.sort()
        for (a0, b0, n0), (a1, _, n1) in itertools.pairwise(spans):
            if a1 < b0 - CLOCK_SLACK_S:
                bad.append(f"{gpu}: {n0} and {n1}")
    return bad


def store_summary(db: str) -> dict[str, Any]:
    """Per problem: best median ms, trials, configs timed more than once."""
    from autocutlass.db import TuningStore

    store = TuningStore(db)
    out: dict[str, Any] = {}
    for best in store.bests():
        problem = best.problem
        keys = [t.config_key for t in store.trials(problem)]
        out[problem.key()] = {"best_ms": best.median_ms, "tflops": best.tflops, "family": best.family,
                              "trials": len(keys), "timed_twice": len(keys) - len(set(keys))}  # fmt: skip
    return out


def run_worker(db: str, env: dict[str, str], gpus: str | None, heartbeat: float, log_to: Path,
               timeout: float) -> tuple[int, float]:  # fmt: skip
    args = ["tune", "--worker", "--db", db, "--heartbeat", str(heartbeat)]
    if gpus is not None:
        args += ["--gpus", gpus]
    return autocutlass(args, env, timeout=timeout, log_to=log_to)


# ---- phases ------------------------------------------------------------------------------------------
def phase_speed(ns: argparse.Namespace, pg: LocalPostgres, have_pg: bool, out: Path) -> dict[str, Any]:
    n = gpu_count()
    suites = [(GEMM_SUITE, case_names(GEMM_SUITE, ns.speed_cases)), (CONV_SUITE, case_names(CONV_SUITE, ns.speed_conv))]
    res: dict[str, Any] = {"gpus": n, "trials": ns.speed_trials, "cases": {p.name: c for p, c in suites}}
    runs = [("one", "0"), ("all", ",".join(str(i) for i in range(n)))]
    for name, gpus in runs:
        db = pg.create(f"speed_{name}") if have_pg else str(out / f"speed-{name}.sqlite")
        env = env_for(Path(tempfile.mkdtemp(prefix=f"ac-cache-{name}-")))  # empty: both runs compile everything
        log_to = out / f"speed-{name}.log"
        t_enq = enqueue(db, env, suites, ns.speed_trials, log_to)
        log(f"speed/{name}: enqueued in {t_enq:.1f} s; worker on GPUs {gpus}")
        rc, wall = run_worker(db, env, gpus, ns.heartbeat, log_to, ns.phase_timeout)
        items = queue_items(db, ns.heartbeat)
        res[name] = {"gpus": gpus, "enqueue_s": round(t_enq, 1), "worker_exit": rc, "worker_wall_s": round(wall, 1),
                     "items": items, "overlaps": overlaps(items), "store": store_summary(db)}  # fmt: skip
        log(f"speed/{name}: worker exit {rc} in {wall:.1f} s; {sum(i['state'] == 'done' for i in items)} done")
        (out / "speed.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
        if name == "all" and ns.export:
            rc, _ = autocutlass(["tune", "--export-shipped", ns.export, "--db", db], env, timeout=120, log_to=log_to)
            res["export_exit"] = rc
    one, many = res["one"], res["all"]
    res["speedup"] = round(one["worker_wall_s"] / max(many["worker_wall_s"], 1e-9), 3)
    res["speedup_per_gpu"] = round(res["speedup"] / max(n, 1), 3)
    ratios = {k: round(v["best_ms"] / one["store"][k]["best_ms"], 4)
              for k, v in many["store"].items() if k in one["store"]}  # fmt: skip
    res["best_ratio_all_over_one"] = ratios  # < 1: the many-GPU run's winner is faster
    if ratios:
        import math

        res["best_ratio_geomean"] = round(math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios)), 4)
    res["exactly_once"] = all(i["state"] == "done" and i["attempts"] == 1 for r in (one, many) for i in r["items"])
    res["timed_twice"] = sum(v["timed_twice"] for r in (one, many) for v in r["store"].values())
    (out / "speed.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    return res


def bench_children(pid: int) -> list[int]:
    """Descendants of ``pid`` whose CUDA_VISIBLE_DEVICES is set and not empty (benchmark children)."""
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(p.name))
    found, todo = [], list(kids.get(pid, []))
    while todo:
        c = todo.pop()
        todo += kids.get(c, [])
        try:
            env = (Path("/proc") / str(c) / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for e in env:
            if e.startswith(b"CUDA_VISIBLE_DEVICES=") and e != b"CUDA_VISIBLE_DEVICES=":
                found.append(c)
    return sorted(found)


def alive(pids: list[int]) -> list[int]:
    out = []
    for p in pids:
        try:
            state = (Path("/proc") / str(p) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(p)
    return out


def phase_kill(ns: argparse.Namespace, pg: LocalPostgres, have_pg: bool, out: Path) -> dict[str, Any]:
    from autocutlass.db import TuningStore

    suites = [(CONV_SUITE, case_names(CONV_SUITE, ns.kill_conv))]
    if ns.kill_cases:
        suites.insert(0, (GEMM_SUITE, case_names(GEMM_SUITE, ns.kill_cases)))
    db = pg.create("kill") if have_pg else str(out / "kill.sqlite")
    env = env_for(Path(tempfile.mkdtemp(prefix="ac-cache-kill-")))
    log_to = out / "kill.log"
    t_enq = enqueue(db, env, suites, ns.kill_trials, log_to)
    res: dict[str, Any] = {"trials": ns.kill_trials, "cases": {p.name: c for p, c in suites}, "enqueue_s": round(t_enq, 1)}
    store = TuningStore(db)
    t0 = time.monotonic()
    deadline = t0 + ns.phase_timeout
    worker = start(["tune", "--worker", "--db", db, "--heartbeat", str(ns.heartbeat)], env, out / "kill-worker1.log")
    events: list[str] = []

    def note(text: str) -> None:
        events.append(f"{time.monotonic() - t0:7.1f} s  {text}")
        log(text)

    killed_child = None
    while killed_child is None and time.monotonic() < deadline and worker.poll() is None:
        kids = bench_children(worker.pid)
        items = queue_items(db, ns.heartbeat)
        running = [i for i in items if i["state"] == "running"]
        if kids and running and _any_trials(store, running):
            killed_child = kids[0]
            os.kill(killed_child, signal.SIGKILL)
            note(f"SIGKILL benchmark child {killed_child} (worker {worker.pid}); running: {[i['name'] for i in running]}")
        time.sleep(0.5)
    done_at_child_kill = sum(i["state"] == "done" for i in queue_items(db, ns.heartbeat))
    killed_worker_items: list[str] = []
    while time.monotonic() < deadline and worker.poll() is None:
        items = queue_items(db, ns.heartbeat)
        done = sum(i["state"] == "done" for i in items)
        running = [i for i in items if i["state"] == "running"]
        if done >= done_at_child_kill + ns.kill_worker_after and running and _any_trials(store, running):
            kids_before = bench_children(worker.pid)
            os.kill(worker.pid, signal.SIGKILL)
            killed_worker_items = [i["name"] for i in running]
            note(f"SIGKILL worker {worker.pid} with {done} done; its running problems: {killed_worker_items}")
            worker.wait()
            time.sleep(10)
            res["orphans_10s_after_worker_kill"] = alive(kids_before)
            break
        time.sleep(0.5)
    if worker.poll() is None:  # it finished everything before the kill: still wait for it
        rc1 = worker.wait(timeout=max(10.0, deadline - time.monotonic()))
        note(f"worker 1 ended by itself ({rc1})")
    note("starting worker 2")
    rc2, wall2 = run_worker(db, env, None, ns.heartbeat, out / "kill-worker2.log", max(30.0, deadline - time.monotonic()))
    note(f"worker 2 exit {rc2} after {wall2:.1f} s")
    items = queue_items(db, ns.heartbeat)
    summary = store_summary(db)
    res.update({
        "killed_bench_child": killed_child, "killed_worker_problems": killed_worker_items, "events": events,
        "wall_s": round(time.monotonic() - t0, 1), "worker2_exit": rc2, "items": items, "overlaps": overlaps(items),
        "store": summary, "bests": len(store.bests()),
        "all_done": all(i["state"] == "done" for i in items),
        "retried": {i["name"]: i["attempts"] for i in items if i["attempts"] != 1},
        "timed_twice": sum(v["timed_twice"] for v in summary.values()),
    })  # fmt: skip
    res["nothing_lost"] = (res["all_done"] and res["timed_twice"] == 0 and not res["overlaps"]
                           and all(res["retried"].get(n) == 2 for n in killed_worker_items))  # fmt: skip
    if ns.export:
        rc, _ = autocutlass(["tune", "--export-shipped", ns.export, "--db", db], env, timeout=120, log_to=log_to)
        res["export_exit"] = rc
    (out / "kill.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    return res


@functools.cache
def _suite_problems() -> dict[str, Any]:
    from autocutlass.cli.shapes import load_cases

    return {c.name: c.problem for path in (GEMM_SUITE, CONV_SUITE) for c in load_cases(str(path))}


def _any_trials(store: Any, running: list[dict[str, Any]]) -> bool:
    problems = _suite_problems()
    return any(store.trials(problems[i["name"]]) for i in running if i["name"] in problems)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", choices=("speed", "kill"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pg-bin", default=None)
    ap.add_argument("--heartbeat", type=int, default=3)
    ap.add_argument("--phase-timeout", type=float, default=280.0)
    ap.add_argument("--speed-cases", type=int, default=-1, help="GEMM suite cases of the speed phase (-1: all)")
    ap.add_argument("--speed-conv", type=int, default=6)
    ap.add_argument("--speed-trials", type=int, default=8)
    ap.add_argument("--kill-cases", type=int, default=0)
    ap.add_argument("--kill-conv", type=int, default=-1)
    ap.add_argument("--kill-trials", type=int, default=16)
    ap.add_argument("--kill-worker-after", type=int, default=3)
    ap.add_argument("--export", default=None)
    ns = ap.parse_args()
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ac-multigpu-"))
    os.chmod(work, 0o755)
    (work / "pg").mkdir()
    pg = LocalPostgres(work / "pg")
    have_pg = pg.start(Path(ns.pg_bin) if ns.pg_bin else None)
    log(f"database: {'PostgreSQL' if have_pg else pg.note}")
    try:
        fn = phase_speed if ns.phase == "speed" else phase_kill
        res = fn(ns, pg, have_pg, out)
    finally:
        pg.stop()
    res["backend"] = "postgresql" if have_pg else "sqlite"
    (out / f"{ns.phase}.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    brief = {k: v for k, v in res.items() if k not in ("items", "store", "one", "all", "best_ratio_all_over_one")}
    print(json.dumps(brief, indent=1, sort_keys=True))
    if ns.phase == "speed":
        for name in ("one", "all"):
            r = res[name]
            print(f"{name:4s} gpus={r['gpus']:5s} wall={r['worker_wall_s']:7.1f} s  exit={r['worker_exit']}  "
                  f"overlaps={len(r['overlaps'])}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
