"""`autocutlass kernels warm`: compile the kernels of stored records into the kernel cache, GPU-free.

A call served by a stored record runs that record's kernel; in a process whose kernel cache
lacks it, the first such call compiles it (seconds per kernel class: measured 7.7 s / 10.7 s for
a first call with an empty cache on an H200 / H100). ``kernels warm`` compiles every kernel the
records of the given databases would run, ahead of time and without a GPU
(``CUTE_DSL_ARCH``), so that a fresh machine, container or CI image serves from the start: bake
the cache into an image with ``AUTOCUTLASS_CACHE_DIR`` pointing at a directory of it.

Records: ``--db`` (repeatable: a file or URL) or, by default, the user database (if it exists)
and every shipped database. Kept: this DSL version's records of families whose sources match
the installed ones (others would never be served, so their kernels are skipped and counted),
optionally only GPU ``--gpu``; torch's recorded times (vendor verdicts) run no kernel of ours.
One compile per (family, config, kernel class): compile keys name no GPU model, so an H200's
records warm an H100 too. The grouped path's tail-zeroing helper is warmed as well, and with
``--seeds SHAPES.json`` (repeatable) the seed configs of every family serving each case of the
file (the first candidates an on-line tuning of such a shape evaluates). With
``--archive FILE.tar.xz`` the objects are compiled into a fresh directory and packed into that
archive instead: how ``tuning_dbs/kernels.tar.xz``, the shipped compiled kernels that a
kernel-cache miss reads (``kernels.object_cache``), is made. Exit 0 when every kernel compiled (or
was cached already), 1 when any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from autocutlass.cli.common import UsageError, positive_int
from autocutlass.kernels import ALL_GATES

Job = tuple[str, dict[str, Any], dict[str, Any]]
"""(family, config, problem) of one compile."""
Outcome = tuple[str, str | None, bool, frozenset[str]]
"""(label, error or None, whether it compiled: False for a kernel already in the cache, the names
of the objects the worker process has loaded or written so far: ``object_cache.touched_objects``)."""


def add_warm_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("warm", help="compile the kernels of stored records into the kernel cache (no GPU needed)")
    p.add_argument("--db", action="append", default=[], metavar="PATH_OR_URL",
                   help="a database whose records to warm (repeatable); default: the user database "
                        "(if it exists) and the shipped ones")  # fmt: skip
    p.add_argument("--gpu", default=None, metavar="NAME", help="only records measured on this GPU model")
    p.add_argument("--seeds", action="append", default=[], metavar="SHAPES.json",
                   help="also compile the tuner's seed configs of every case of this shapes file (repeatable): the first "
                        "candidates an on-line tuning of a shape like these evaluates, so that it finds them compiled")  # fmt: skip
    p.add_argument("--arch", default="sm_90a", choices=("sm_90a",), help="target architecture (default sm_90a)")
    p.add_argument("--cache-dir", default=None, type=Path, metavar="DIR",
                   help="the kernel cache to fill (default: AUTOCUTLASS_CACHE_DIR's kernels/)")  # fmt: skip
    p.add_argument("--archive", default=None, type=Path, metavar="FILE.tar.xz",
                   help="write the objects into this archive instead of a kernel cache (how tuning_dbs/kernels.tar.xz, "
                        "the shipped compiled kernels, is made)")  # fmt: skip
    p.add_argument("--workers", type=positive_int, default=max(1, min(8, (os.cpu_count() or 2) - 1)),
                   help="compile in N GPU-blind processes")  # fmt: skip
    p.set_defaults(func=cmd_warm)


def _sources(ns: argparse.Namespace) -> list[tuple[str, bool]]:
    """(database, whether it is a shipped read-only file) to read records from."""
    if ns.db:
        return [(d, False) for d in ns.db]
    from autocutlass.db.layered import shipped_db_paths
    from autocutlass.db.location import resolve
    from autocutlass.settings import current

    s = current()
    out: list[tuple[str, bool]] = []
    user = resolve(s.db_url)
    if user.sqlite_path is None or user.sqlite_path.is_file():
        out.append((s.db_url, False))
    out += [(str(p), True) for p in shipped_db_paths(s.shipped_dbs_dir)]
    return out


def _records(source: str, shipped: bool, gpu: str | None) -> list[Any]:
    from autocutlass.db import TuningStore
    from autocutlass.db.engine import release

    store = TuningStore(source, read_only=True, immutable=shipped)  # never writes, never creates
    try:
        return store.bests(gpu)
    finally:
        if shipped:
            release(source)


JobKey = tuple[str, str, Any]
"""(family, config as sorted JSON, kernel class key): one compile each."""


def _job_key(family: str, config: dict[str, Any], problem: Any) -> JobKey:
    return family, json.dumps(config, sort_keys=True), problem.kernel_class_key()


def _keyed_seeds(shapes: Sequence[str]) -> tuple[dict[JobKey, Job], int]:
    from autocutlass.cli.shapes import load_cases
    from autocutlass.kernels import families_for

    jobs: dict[JobKey, Job] = {}
    n = 0
    for path in shapes:
        for case in load_cases(path):
            n += 1
            for fam in families_for(case.problem):
                for cfg in fam.seeds(case.problem):
                    d = fam.config_to_dict(cfg)
                    jobs.setdefault(_job_key(fam.name, d, case.problem), (fam.name, d, case.problem.as_dict()))
    return jobs, n


def seed_jobs(shapes: Sequence[str]) -> tuple[list[Job], int]:
    """The seed configs (``family.seeds``) of every family that serves each case of ``shapes``,
    one job per (family, config, kernel class); and the number of cases."""
    jobs, n = _keyed_seeds(shapes)
    return list(jobs.values()), n


def _keyed_records(records: Sequence[Any]) -> tuple[dict[JobKey, Job], dict[str, int]]:
    """The compiles ``records`` need, one per (family, config, kernel class), and what was
    skipped (counts by reason)."""
    from autocutlass.device import dsl_version
    from autocutlass.kernels import family_names, get_family

    hashes = {name: get_family(name).source_hash() for name in family_names()}
    jobs: dict[JobKey, Job] = {}
    skipped: dict[str, int] = {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for r in records:
        if r.family not in hashes:
            skip(f"family {r.family!r} is not a kernel family of this version")
            continue
        if r.hard_key.kernel_hash != hashes[r.family]:
            skip("measured with other kernel sources (never served by this version)")
            continue
        if r.hard_key.dsl_version != dsl_version():
            skip(f"measured with DSL {r.hard_key.dsl_version} (installed: {dsl_version()})")
            continue
        jobs.setdefault(_job_key(r.family, r.config, r.problem), (r.family, r.config, r.problem.as_dict()))
    return jobs, skipped


def plan_jobs(records: Sequence[Any]) -> tuple[list[Job], dict[str, int]]:
    """The compiles ``records`` need, one per (family, config, kernel class), and what was
    skipped (counts by reason)."""
    jobs, skipped = _keyed_records(records)
    return list(jobs.values()), skipped


def compile_job(job: Job, cache_dir: str) -> Outcome:
    """Compile one record's kernel into ``cache_dir`` (in a worker: GPU-blind); (label, error, compiled)."""
    family, cfg_dict, prob_dict = job
    from autocutlass.errors import CantImplement, KernelCompileError
    from autocutlass.kernels import get_family
    from autocutlass.kernels.object_cache import ObjectCache, touched_objects
    from autocutlass.ops.registry import problem_from_dict

    fam = type(get_family(family))(cache_dir=Path(cache_dir))
    cfg = fam.config_from_dict(cfg_dict)
    problem = problem_from_dict(prob_dict)
    label = f"{family} {cfg} for {problem.describe()}"
    before = ObjectCache.total_compiled()
    try:
        fam.compile(cfg, problem)
    except (CantImplement, KernelCompileError) as e:
        return label, f"{type(e).__name__}: {e}", False, touched_objects()
    return label, None, ObjectCache.total_compiled() > before, touched_objects()


def _helpers_job(cache_dir: str) -> Outcome:
    """Worker: the grouped torch path's tail-zeroing kernel, both widths."""
    from autocutlass.errors import KernelCompileError
    from autocutlass.kernels.helper_kernels import get_tail_zero
    from autocutlass.kernels.object_cache import ObjectCache, touched_objects

    before = ObjectCache.total_compiled()
    try:
        for width in (16, 32):
            get_tail_zero(width, Path(cache_dir))
    except KernelCompileError as e:
        return "tail_zero", str(e), False, touched_objects()
    return "tail_zero (16 and 32 bits)", None, ObjectCache.total_compiled() > before, touched_objects()


GATE_VARIABLES = tuple(var for _, var in ALL_GATES.values())
"""The settings that switch kernel families off (``kernels.ALL_GATES``): a compile process turns
them all on, since a stored record of a family switched off here still runs where a user turns
it on, and its kernel belongs in the cache (or the shipped archive)."""


def _init_worker(arch: str) -> None:
    """A compile process: the target architecture, no GPU (compiles need none), every gated
    family on (``GATE_VARIABLES``)."""
    os.environ["CUTE_DSL_ARCH"] = arch
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    for var in GATE_VARIABLES:
        os.environ[var] = "1"


def _run(jobs: Sequence[Job], cache_dir: str, workers: int, arch: str) -> Iterator[Outcome]:
    """Outcomes in the order they finish, from ``workers`` spawned processes (always fresh ones:
    a kernel this process holds in memory would count as cached without being in ``cache_dir``)."""
    import concurrent.futures as cf
    import multiprocessing as mp

    with cf.ProcessPoolExecutor(max(1, workers), mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                initargs=(arch,)) as pool:  # fmt: skip
        futures = [pool.submit(_helpers_job, cache_dir), *(pool.submit(compile_job, j, cache_dir) for j in jobs)]
        for fut in cf.as_completed(futures):
            yield fut.result()


def write_archive(objects: Path, archive: Path, only: Iterable[str] | None = None) -> int:
    """Pack the ``*.o`` files of ``objects`` (with ``only``: those of these names) into ``archive``
    (xz, names sorted, times and owners zeroed: the same objects give the same bytes), replacing
    it atomically; the member count."""
    import tarfile
    import tempfile

    keep = None if only is None else set(only)
    names = sorted(p.name for p in objects.glob("*.o") if keep is None or p.name in keep)
    archive.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=archive.parent, prefix=archive.name, suffix=".tmp")
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:xz", preset=9) as tar:
            for name in names:
                info = tar.gettarinfo(str(objects / name), arcname=name)
                info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
                with open(objects / name, "rb") as f:
                    tar.addfile(info, f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, archive)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(names)


def cmd_warm(ns: argparse.Namespace) -> int:
    os.environ["CUTE_DSL_ARCH"] = ns.arch
    if ns.archive is not None:
        import tempfile

        if ns.cache_dir is not None:
            raise UsageError("--archive and --cache-dir: give one (the archive is written from a fresh cache)")
        with tempfile.TemporaryDirectory() as tmp:
            ns.cache_dir = Path(tmp)  # objects of the same key in the archive being replaced are reused
            rc, touched = _warm(argparse.Namespace(**{**vars(ns), "archive": None}))
            if rc == 0:
                # Only the objects this run's kernels loaded or compiled: reusing the archive being
                # replaced unpacks all of it into the directory, objects no record or seed names
                # any more (older kernel sources, records since replaced) included.
                n = write_archive(Path(tmp), ns.archive, only=touched)
                print(f"kernels warm: {n} objects into {ns.archive} ({ns.archive.stat().st_size} bytes)")
        return rc
    return _warm(ns)[0]


def _warm(ns: argparse.Namespace) -> tuple[int, frozenset[str]]:
    """``cmd_warm`` into a kernel cache: the exit status, and the names of the objects the
    compile processes loaded or wrote."""
    from autocutlass.settings import current

    seeds: dict[JobKey, Job] = {}
    n_cases = 0
    if ns.seeds:  # before any database is read: a bad file fails at once
        try:
            seeds, n_cases = _keyed_seeds(ns.seeds)
        except (OSError, ValueError) as e:
            raise UsageError(f"--seeds: {e}") from e
    cache_dir = (ns.cache_dir or current().kernel_cache_dir).expanduser().resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    records: list[Any] = []
    for source, shipped in _sources(ns):
        try:
            found = _records(source, shipped, ns.gpu)
        except Exception as e:  # an unreadable database is named, not a traceback
            raise UsageError(f"cannot read the records of {source}: {type(e).__name__}: {e}") from e
        print(f"{source}: {len(found)} records" + (f" of {ns.gpu}" if ns.gpu else ""), flush=True)
        records += found
    keyed, skipped = _keyed_records(records)
    for why, n in sorted(skipped.items()):
        print(f"skipped {n} record(s): {why}")
    if ns.seeds:
        extra = {k: j for k, j in seeds.items() if k not in keyed}
        print(f"seeds of {n_cases} case(s): {len(extra)} more kernel(s)", flush=True)
        keyed.update(extra)
    jobs = list(keyed.values())
    t0 = time.perf_counter()
    compiled = cached = failed = 0
    touched: set[str] = set()
    for label, err, did, names in _run(jobs, str(cache_dir), ns.workers, ns.arch):
        touched |= names
        if err is not None:
            failed += 1
            print(f"FAILED {label}: {err[:300]}", flush=True)
        elif did:
            compiled += 1
        else:
            cached += 1
    print(f"kernels warm: {len(jobs)} kernel(s) of {len(records)} record(s) and the helpers into {cache_dir}: "
          f"{compiled} compiled, {cached} already cached, {failed} failed in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    return (1 if failed else 0), frozenset(touched)
