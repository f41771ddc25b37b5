"""``autocutlass db rekey``: carry a database's records over a kernel-source change that leaves
their generated code as it was.

A record's hard key holds its kernel family's source hash, and any edit of the family's hashed
files retires every record of the family, also those whose kernels the edit did not touch (a
change to the split-K reduce kernel retires the records that never launch it). ``rekey`` finds
the best records of the input whose source hash is not the installed one and whose problem has no
record of the installed sources on that GPU yet (a newer tuning's is never displaced by an older
one's, which may have been timed otherwise), compiles each record's
kernels (the family's and the helper kernels its runner launches) from the source tree the record
was measured with (``--old-src``, a checkout whose family hash must equal the record's) and from
the installed sources, each in a fresh process and cache (``kernels/code_digest.py``), and copies
a record (and its trial) under the installed hash only where every object's bytes are equal. The
rest stay retired, to be tuned again. The output holds everything of the input plus the copies
(``db merge``'s rules); vendor verdicts need no copy (they pair with records of any kernel hash).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from autocutlass.cli.common import UsageError

DIGEST_TIMEOUT_S = 3600
"""The longest one source tree's compiles may take, at least (``digest_timeout``)."""

DIGEST_JOB_S = 60
"""Each job's share of a source tree's time limit: a GEMM kernel change retires every record of the
families built on it (about 250 jobs per shipped file), which one compile process takes longer than
``DIGEST_TIMEOUT_S`` over on a 2-core machine."""


def digest_timeout(jobs: int, workers: int) -> float:
    """Seconds one source tree's ``jobs`` compiles may take in ``workers`` processes."""
    return max(DIGEST_TIMEOUT_S, DIGEST_JOB_S * jobs / max(1, workers))


def add_rekey_parser(sub: argparse._SubParsersAction[Any]) -> None:
    rk = sub.add_parser("rekey", help="copy records whose generated code a kernel-source change left as it was "
                                      "under the installed kernel sources")  # fmt: skip
    rk.add_argument("input", metavar="DB", help="the database file to read (never written)")
    rk.add_argument("--old-src", required=True, metavar="DIR",
                    help="a checkout of the sources the records were measured with: the directory holding its "
                         "autocutlass package (e.g. a `git worktree` of that commit)")  # fmt: skip
    rk.add_argument("-o", "--output", required=True, metavar="OUT", help="the new file to write")
    rk.add_argument("--force", action="store_true", help="replace OUT if it exists")
    rk.add_argument("--workers", type=int, default=max(1, min(8, (os.cpu_count() or 2) - 1)),
                    help="compile processes per source tree")  # fmt: skip
    rk.set_defaults(func=cmd_rekey)


def digests(tree: Path, jobs: list[list[Any]], workers: int) -> list[dict[str, Any]]:
    """``kernels/code_digest.py`` over ``jobs`` with ``tree``'s ``autocutlass`` first on the path."""
    script = Path(__file__).resolve().parent.parent / "kernels" / "code_digest.py"
    with tempfile.TemporaryDirectory(prefix="autocutlass-rekey-") as tmp:
        path = Path(tmp) / "jobs.json"
        path.write_text(json.dumps(jobs))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        r = subprocess.run([sys.executable, str(script), str(path), str(workers)], env=env, cwd=tmp,
                           capture_output=True, text=True, timeout=digest_timeout(len(jobs), workers), check=False)  # fmt: skip
    if r.returncode != 0:
        raise UsageError(f"compiling the records' kernels from {tree} failed:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if Path(out["autocutlass"]) != (tree / "autocutlass").resolve():
        raise UsageError(f"the compiles under {tree} imported autocutlass from {out['autocutlass']}, not from that "
                         f"tree (an installed copy shadows it?)")  # fmt: skip
    return list(out["results"])


def decide(record_hash: str, installed_hash: str, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """None when a record of kernel hash ``record_hash`` can be carried to ``installed_hash``: the
    old tree's compile (``old``) has the record's hash, the installed one's (``new``) the installed
    hash, neither failed and their objects are byte for byte the same; else why not."""
    if old.get("error") or new.get("error"):
        return f"compile failed: {old.get('error') or new.get('error')}"
    if old["src"] != record_hash:
        return f"--old-src has kernel sources {old['src']}, the record {record_hash}"
    if new["src"] != installed_hash:
        return f"the installed compile reports sources {new['src']}, expected {installed_hash}"
    if old["digests"] != new["digests"]:
        return "its generated code changed"
    return None


def cmd_rekey(ns: argparse.Namespace) -> int:
    from autocutlass.db.transfer import merge_snapshots, read_file, rekeyed
    from autocutlass.device import dsl_version
    from autocutlass.kernels import source_hashes

    out = Path(ns.output).expanduser().resolve()
    if out.exists() and not ns.force:
        raise UsageError(f"{out} exists; db rekey writes a new file: choose another -o, or add --force to replace it")
    old_tree = Path(ns.old_src).expanduser().resolve()
    if not (old_tree / "autocutlass" / "__init__.py").is_file():
        raise UsageError(f"--old-src {old_tree}: no autocutlass package in it")
    installed = source_hashes()
    snap = read_file(ns.input)
    have = {(b.problem.key(), b.hard_key.key()) for b in snap.bests}

    def carried_key(b: Any) -> tuple[str, str]:
        return b.problem.key(), dataclasses.replace(b.hard_key, kernel_hash=installed[b.family]).key()

    stale = [i for i, b in enumerate(snap.bests)
             if b.family in installed and b.hard_key.kernel_hash != installed[b.family]
             and b.hard_key.dsl_version == dsl_version() and carried_key(b) not in have]  # fmt: skip
    jobs: dict[str, list[Any]] = {}  # one compile per (family, config, problem), keyed by its JSON
    job_of: dict[int, str] = {}
    for i in stale:
        b = snap.bests[i]
        job = [b.family, b.config, b.problem.as_dict()]
        job_of[i] = json.dumps(job, sort_keys=True)
        jobs.setdefault(job_of[i], job)
    olds: dict[str, dict[str, Any]] = {}
    news: dict[str, dict[str, Any]] = {}
    if jobs:
        olds = dict(zip(jobs, digests(old_tree, list(jobs.values()), ns.workers)))
        news = dict(zip(jobs, digests(Path(__file__).resolve().parents[2], list(jobs.values()), ns.workers)))
    picks: dict[int, str] = {}
    for i in stale:
        b = snap.bests[i]
        why = decide(b.hard_key.kernel_hash, installed[b.family], olds[job_of[i]], news[job_of[i]])
        if why is None:
            picks[i] = installed[b.family]
        else:
            print(f"  left retired: {b.family} {b.problem.describe()} on {b.hard_key.gpu_name}: {why}")
    stats = merge_snapshots(snap, rekeyed(snap, picks), out)
    print(f"rekeyed {ns.input} into {out}: {len(stale)} best record(s) of other kernel sources without one of the "
          f"installed sources, {len(picks)} carried to "
          f"the installed sources (the same generated code), {len(stale) - len(picks)} left retired "
          f"({stats.describe()})")  # fmt: skip
    return 0
