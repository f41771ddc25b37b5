"""Probe: a tuning campaign through the queue on one GPU, against plain ``tune``, and a killed worker.

Three phases, each into a fresh database and (A, B) a fresh kernel cache, so both compile cold:

A. ``autocutlass tune --shapes SHAPES --trials T``: the reference wall time.
B. ``tune --shapes SHAPES --enqueue`` then one ``tune --worker`` to the end: the campaign's wall
   time (enqueue + worker) against A's; the same problems must get a best each.
C. Two workers on the campaign of the first ``--kill-cases`` cases (B's kernel cache, warm): the
   second is SIGKILLed once it has recorded trials of a problem; the first runs to the end, and
   re-queues the dead one's problem after the grace period (``--heartbeat`` x 6). Checked: every
   problem done exactly once, the killed one on its second attempt, no config timed twice for a
   problem, one best per problem.

The database is a local PostgreSQL started for the run (``/usr/lib/postgresql/*/bin``; as root
through ``runuser -u postgres``), stopped at the end; without PostgreSQL (or psycopg) it falls
back to SQLite files and says so. Nothing needs the network. About 6 minutes on an H100 with the
defaults (14 cases, 4 trials; 6 cases in C).

GPU machine: python benchmarks/probes/queue_gpu_run.py [--trials 4] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ---- the database ------------------------------------------------------------------------------
class LocalPostgres:
    """A throwaway PostgreSQL server (trust auth, fsync off) in ``root``, or None when there is none."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin: Path | None = None
        self.port = 0
        self.as_pg: list[str] = []
        self.note = ""

    def start(self, bin_dir: Path | None = None) -> bool:
        """Start a server from ``bin_dir`` (default: the newest /usr/lib/postgresql/*/bin, or
        $AUTOCUTLASS_PG_BIN); False, with ``note`` saying why, when there is none to start."""
        if bin_dir is None and os.environ.get("AUTOCUTLASS_PG_BIN"):
            bin_dir = Path(os.environ["AUTOCUTLASS_PG_BIN"])
        if bin_dir is not None:
            bins = [bin_dir / "initdb"] if (bin_dir / "initdb").exists() else []
        else:
            root = Path("/usr/lib/postgresql")
            bins = sorted(root.glob("*/bin/initdb")) if root.is_dir() else []
        if not bins:
            self.note = f"PostgreSQL is not installed (no initdb in {bin_dir or '/usr/lib/postgresql'}): SQLite files instead"
            return False
        try:
            import psycopg  # noqa: F401
        except ImportError:
            self.note = "psycopg is not installed (pip install 'autocutlass[postgres]'): SQLite files instead"
            return False
        self.bin = bins[-1].parent
        if os.getuid() == 0:
            if shutil.which("runuser") is None:
                self.note = "running as root without runuser (initdb refuses root): SQLite files instead"
                return False
            user = _pg_user()
            self.as_pg = ["runuser", "-u", user, "--"]
            os.chown(self.root, *_pg_ids(user))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        data = self.root / "data"
        self._run([str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"])
        self._run([str(self.bin / "pg_ctl"), "-D", str(data), "-w", "-l", str(self.root / "log"), "-o",
                   f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                   "start"])  # fmt: skip
        return True

    def create(self, name: str) -> str:
        assert self.bin is not None
        self._run([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name])
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.bin is not None:
            subprocess.run([*self.as_pg, str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate",
                            "stop"], capture_output=True, check=False)  # fmt: skip

    def _run(self, cmd: list[str]) -> None:
        subprocess.run([*self.as_pg, *cmd], check=True, capture_output=True)


def _pg_user() -> str:
    """The account the server runs as when we are root: ``postgres``, created when missing and
    ``useradd`` exists, else ``nobody``."""
    import pwd

    try:
        pwd.getpwnam("postgres")
        return "postgres"
    except KeyError:
        pass
    if shutil.which("useradd") is not None:
        subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], capture_output=True, check=False)
        try:
            pwd.getpwnam("postgres")
            return "postgres"
        except KeyError:
            pass
    return "nobody"


def _pg_ids(user: str) -> tuple[int, int]:
    import pwd

    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


# ---- running autocutlass -----------------------------------------------------------------------
def autocutlass(args: list[str], env: dict[str, str], *, timeout: float, log_to: Path) -> tuple[int, float]:
    """Run ``python -m autocutlass.cli ARGS`` to its end; (exit code, wall seconds)."""
    t0 = time.monotonic()
    with log_to.open("ab") as out:
        try:
            done = subprocess.run([sys.executable, "-m", "autocutlass.cli", *args], env=env, cwd=ROOT, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            log(f"timed out after {timeout:.0f} s: autocutlass {' '.join(args)}")
            return -1, time.monotonic() - t0
    return done.returncode, time.monotonic() - t0


def start(args: list[str], env: dict[str, str], log_to: Path) -> subprocess.Popen[bytes]:
    out = log_to.open("ab")
    return subprocess.Popen([sys.executable, "-m", "autocutlass.cli", *args], env=env, cwd=ROOT, stdout=out,
                            stderr=subprocess.STDOUT)  # fmt: skip


def env_for(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env["AUTOCUTLASS_CACHE_DIR"] = str(cache)
    env["AUTOCUTLASS_SHIPPED_DBS"] = "off"
    return env


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=str(ROOT / "benchmarks" / "shapes.json"))
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--kill-cases", type=int, default=6, help="cases of phase C (the killed worker)")
    ap.add_argument("--heartbeat", type=int, default=3, help="phase C's heartbeat seconds (grace: 6x)")
    ap.add_argument("--phase-timeout", type=float, default=150.0,
                    help="seconds per phase (3 phases: the 8-minute bound)")  # fmt: skip
    ap.add_argument("--json", default=None)
    ns = ap.parse_args()
    sys.path.insert(0, str(ROOT))

    work = Path(tempfile.mkdtemp(prefix="autocutlass-queue-probe-"))
    os.chmod(work, 0o755)
    pg = LocalPostgres(work / "pg")
    (work / "pg").mkdir()
    summary: dict[str, Any] = {"trials": ns.trials, "shapes": ns.shapes}
    try:
        have_pg = pg.start()
        summary["backend"] = "postgresql" if have_pg else "sqlite"
        if not have_pg:
            summary["note"] = pg.note
            log(pg.note)
        names = ("plain", "queue", "kill")
        dbs = {name: pg.create(name) if have_pg else str(work / f"{name}.sqlite") for name in names}
        summary.update(phase_a(ns, work, dbs["plain"]))
        summary.update(phase_b(ns, work, dbs["queue"]))
        summary.update(phase_c(ns, work, dbs["kill"]))
    finally:
        pg.stop()
    summary["logs"] = str(work)
    text = json.dumps(summary, indent=2, sort_keys=True)
    print(text)
    if ns.json:
        Path(ns.json).write_text(text + "\n")
    ok = summary.get("b_bests") == summary.get("a_bests") and summary.get("c_nothing_lost") is True
    return 0 if ok else 1


def phase_a(ns: argparse.Namespace, work: Path, db: str) -> dict[str, Any]:
    from autocutlass.db import TuningStore

    log("A: autocutlass tune --shapes (plain)")
    rc, wall = autocutlass(["tune", "--shapes", ns.shapes, "--trials", str(ns.trials), "--db", db],
                           env_for(work / "cache-a"), timeout=ns.phase_timeout, log_to=work / "a.log")  # fmt: skip
    bests = len(TuningStore(db).bests())
    log(f"A: exit {rc}, {wall:.1f} s, {bests} best records")
    return {"a_exit": rc, "a_wall_s": round(wall, 1), "a_bests": bests}


def phase_b(ns: argparse.Namespace, work: Path, db: str) -> dict[str, Any]:
    from autocutlass.db import TuningStore

    env = env_for(work / "cache-b")
    log("B: enqueue + one worker to the end")
    rc_e, wall_e = autocutlass(["tune", "--shapes", ns.shapes, "--enqueue", "--trials", str(ns.trials), "--db", db],
                               env, timeout=120, log_to=work / "b.log")  # fmt: skip
    rc_w, wall_w = autocutlass(["tune", "--worker", "--db", db], env, timeout=ns.phase_timeout, log_to=work / "b.log")
    autocutlass(["tune", "--status", "--db", db], env, timeout=60, log_to=work / "b-status.log")
    bests = len(TuningStore(db).bests())
    log(f"B: enqueue {wall_e:.1f} s, worker exit {rc_w} in {wall_w:.1f} s, {bests} best records")
    return {"b_enqueue_exit": rc_e, "b_enqueue_s": round(wall_e, 1), "b_worker_exit": rc_w,
            "b_worker_wall_s": round(wall_w, 1), "b_wall_s": round(wall_e + wall_w, 1), "b_bests": bests,
            "b_status": (work / "b-status.log").read_text()}  # fmt: skip


def phase_c(ns: argparse.Namespace, work: Path, db: str) -> dict[str, Any]:
    import optuna

    from autocutlass.cli.shapes import load_cases
    from autocutlass.db import TuningStore
    from autocutlass.db.queue import TuningQueue

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    env = env_for(work / "cache-b")  # warm: phase B compiled these kernels
    cases = load_cases(ns.shapes)[: ns.kill_cases]
    only = [a for c in cases for a in ("--only", c.name)]
    hb = ["--heartbeat", str(ns.heartbeat)]
    log(f"C: {len(cases)} cases, two workers, the second killed mid-problem")
    autocutlass(["tune", "--shapes", ns.shapes, *only, "--enqueue", "--trials", str(ns.trials), "--db", db], env,
                timeout=120, log_to=work / "c.log")  # fmt: skip
    t0 = time.monotonic()
    first = start(["tune", "--worker", "--db", db, *hb], env, work / "c-first.log")
    time.sleep(5)
    second = start(["tune", "--worker", "--db", db, *hb], env, work / "c-second.log")
    queue = TuningQueue(db, heartbeat_s=ns.heartbeat, grace_s=6 * ns.heartbeat)
    store = TuningStore(db)
    killed = None
    deadline = time.monotonic() + ns.phase_timeout
    while killed is None and time.monotonic() < deadline and second.poll() is None:
        st = queue.status("default")
        for tc in st.toolchains if st else ():
            for item in tc.items:
                if item.state == "running" and (item.claimant or {}).get("pid") == second.pid:
                    problem = next(c.problem for c in cases if c.name == item.name)
                    if store.trials(problem):
                        os.kill(second.pid, signal.SIGKILL)
                        killed = item.name
        time.sleep(0.5)
    log(f"C: killed the second worker in {killed}" if killed else "C: the second worker never got a problem")
    try:
        rc = first.wait(timeout=max(10.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        first.kill()
        rc = -1
    second.wait(timeout=30)
    wall = time.monotonic() - t0
    st = queue.status("default")
    items = st.toolchains[0].items if st and st.toolchains else ()
    states = {i.name: (i.state, i.attempts, (i.outcome or {}).get("result")) for i in items}
    twice = {}
    for c in cases:
        keys = [t.config_key for t in store.trials(c.problem)]
        if len(keys) != len(set(keys)):
            twice[c.name] = len(keys) - len(set(keys))
    lost = killed is not None and (
        any(s != "done" for s, _, _ in states.values()) or states.get(killed, (None, 0, None))[1] != 2
        or twice or len(store.bests()) != len(cases)
    )  # fmt: skip
    log(f"C: first worker exit {rc} in {wall:.1f} s; {states}; configs timed twice: {twice or 'none'}")
    return {"c_killed_problem": killed, "c_first_exit": rc, "c_wall_s": round(wall, 1), "c_items": states,
            "c_timed_twice": twice, "c_bests": len(store.bests()),
            "c_nothing_lost": killed is not None and not lost}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
