"""``autocutlass db ...``: thin over ``autocutlass.db``.

``add_db_parser(subparsers)`` registers ``db`` with the subcommands ``show``, ``export``,
``import``, ``merge``, ``prune``, ``upgrade``, ``readme`` and ``rekey`` (``autocutlass.cli.db_rekey``). Each sets ``func`` to its handler: a function
of the parsed namespace returning the exit code. ``show`` and ``export`` only read (every
database opened read-only); ``import``, ``merge`` and ``upgrade`` write the database or file they
name; ``readme`` writes the shipped databases' README. A ``DatabaseError`` propagates to
``autocutlass.cli.main``, which prints it and exits with 1; a ``UsageError`` (e.g. ``merge`` onto
an existing file without ``--force``) exits with 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocutlass.background import BACKGROUND_NOTE
from autocutlass.cli.common import UsageError, print_table
from autocutlass.db import (
    BestRecord,
    TuningStore,
    export,
    import_,
    merge,
    release,
    resolve,
    shipped_db_paths,
    upgrade,
)
from autocutlass.errors import DatabaseError
from autocutlass.settings import current
from autocutlass.vendor import VENDOR_FAMILY, variant_of


def add_db_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Register ``db`` and its subcommands on ``subparsers``; returns the ``db`` parser."""
    db: argparse.ArgumentParser = subparsers.add_parser(
        "db", help="show, export, import, merge or upgrade tuning databases"
    )
    sub = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    with_db = argparse.ArgumentParser(add_help=False)
    with_db.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="database file or SQLAlchemy URL (default: AUTOCUTLASS_DB, else ~/.cache/autocutlass/tuning.sqlite)",
    )

    show = sub.add_parser("show", parents=[with_db],
                          help="table of the best record of every tuned problem, the shipped databases' too")  # fmt: skip
    show.add_argument("--gpu", metavar="NAME", default=None,
                      help="only records of GPUs whose name contains NAME (any case), e.g. h200")  # fmt: skip
    show.add_argument("--no-shipped", dest="shipped", action="store_false",
                      help="leave out the databases shipped with autocutlass")  # fmt: skip
    show.set_defaults(func=cmd_show)

    exp = sub.add_parser("export", parents=[with_db], help="write the database to FILE (.json: JSON, else SQLite)")
    exp.add_argument("file", metavar="FILE")
    exp.set_defaults(func=cmd_export)

    imp = sub.add_parser("import", parents=[with_db], help="merge FILE (SQLite or JSON export) into the database")
    imp.add_argument("file", metavar="FILE")
    imp.set_defaults(func=cmd_import)

    mrg = sub.add_parser("merge", help="merge files A and B into a new file C (faster best wins, no trial lost)")
    mrg.add_argument("a", metavar="A")
    mrg.add_argument("b", metavar="B")
    mrg.add_argument("-o", "--output", dest="output", metavar="C", required=True)
    mrg.add_argument("--force", action="store_true", help="replace C if it exists")
    mrg.add_argument("--replace", action="store_true",
                     help="B's best records replace A's whatever their times (B re-times A's records: "
                          "`tune --verdicts` on a copy of A), torch's times with them")  # fmt: skip
    mrg.set_defaults(func=cmd_merge)

    prn = sub.add_parser("prune", help="write a copy of FILE without the best records of older kernel sources that a "
                                       "record of the installed sources replaces")  # fmt: skip
    prn.add_argument("file", metavar="FILE", help="the database file to read (never written)")
    prn.add_argument("-o", "--output", dest="output", metavar="OUT", required=True)
    prn.add_argument("--force", action="store_true", help="replace OUT if it exists")
    prn.set_defaults(func=cmd_prune)

    upg = sub.add_parser("upgrade", parents=[with_db], help="upgrade the database to this autocutlass's schema")
    upg.set_defaults(func=cmd_upgrade)

    rd = sub.add_parser("readme", help="write the README of the shipped databases, generated from them")
    rd.add_argument("--shipped-dir", metavar="DIR", default=None,
                    help="directory of the shipped *.sqlite files (default: AUTOCUTLASS_SHIPPED_DBS, else the "
                         "package's tuning_dbs/)")  # fmt: skip
    rd.add_argument("-o", "--output", metavar="FILE", default=None, help="where to write it (default DIR/README.md; - for stdout)")
    rd.set_defaults(func=cmd_readme)

    from autocutlass.cli.db_rekey import add_rekey_parser

    add_rekey_parser(sub)
    return db


def _db_url(ns: argparse.Namespace) -> str:
    url: str | None = getattr(ns, "db", None)
    return url if url else current().db_url


def _existing_store(url: str) -> TuningStore | None:
    """The store at ``url``, opened read-only, or None when it is a SQLite file not created yet."""
    loc = resolve(url)
    if loc.sqlite_path is not None and not loc.sqlite_path.exists():
        return None
    return TuningStore(url, read_only=True)


def _no_db(url: str) -> str:
    return f"no tuning database at {resolve(url).display} yet (nothing has been tuned)"


# ---- configs as text ---------------------------------------------------------------------------
CONFIG_GROUPS = (("tile", ("tile_m", "tile_n", "tile_k")), ("cluster", ("cluster_m", "cluster_n")))
"""Fields shown joined, as ``tile=128x256x64`` and ``cluster=2x1``, when a config has them all."""

CONFIG_ORDER = ("tile_m", "tile_n", "tile_k", "cluster_m", "cluster_n", "schedule", "split_k", "split_mode",
                "stream_k", "swap_ab", "stages", "raster", "swizzle", "store")  # fmt: skip
"""The fields that decide most about a kernel, first; any other field follows by name."""


def config_summary(config: dict[str, Any], width: int | None = None) -> str:
    """``key=value`` pairs, the fields that matter most first (``CONFIG_ORDER``, tile and cluster
    joined as ``CONFIG_GROUPS`` says), then the rest by name; flags that are off (False) are left
    out. Cut to ``width`` characters if given."""
    rank = {k: i for i, k in enumerate(CONFIG_ORDER)}
    keys = sorted((k for k, v in config.items() if v is not False), key=lambda k: (rank.get(k, len(rank)), k))
    parts: list[str] = []
    done: set[str] = set()
    for k in keys:
        if k in done:
            continue
        group = next(((label, fields) for label, fields in CONFIG_GROUPS if k in fields), None)
        if group is not None and all(f in config for f in group[1]):
            parts.append(f"{group[0]}=" + "x".join(str(config[f]) for f in group[1]))
            done.update(group[1])
        else:
            parts.append(f"{k}={config[k]}")
            done.add(k)
    text = " ".join(parts)
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


# ---- show --------------------------------------------------------------------------------------
_HEADERS = ("problem", "family", "config", "median ms", "TFLOP/s", "GPU", "from")


@dataclass(frozen=True)
class _Shown:
    record: BestRecord
    source: str
    """'user', or 'shipped NAME.sqlite' (with ', overridden' when the user's database has a best of
    the same problem and hard key, which dispatch uses instead)."""


def _gpu_matches(name: str, pattern: str | None) -> bool:
    return pattern is None or pattern.strip().lower() in name.lower()


def _identity(r: BestRecord) -> tuple[str, str]:
    return r.problem.key(), r.hard_key.key()


def _shipped_records(gpu: str | None, user: Iterable[BestRecord]) -> tuple[list[_Shown], list[Path]]:
    """The shipped databases' best records of GPUs matching ``gpu``, and the files read."""
    mine = {_identity(r) for r in user}
    shown: list[_Shown] = []
    paths = shipped_db_paths(current().shipped_dbs_dir)
    for path in paths:
        try:
            records = TuningStore(path, read_only=True, immutable=True).bests(vendor=True)
        except DatabaseError as e:
            print(f"autocutlass: warning: skipping shipped database {path}: {e}", file=sys.stderr)
            continue
        finally:
            release(path)
        for r in records:
            if _gpu_matches(r.hard_key.gpu_name, gpu):
                over = ", overridden" if _identity(r) in mine else ""
                shown.append(_Shown(r, f"shipped {path.name}{over}"))
    return shown, paths


@dataclass(frozen=True)
class Here:
    """The hard-key fields of this machine's GPU that decide whether a record is a sibling's."""

    gpu_name: str
    cc: str
    sm_count: int
    dsl_version: str


def _here() -> Here | None:
    """This machine's GPU (torch's current device), or None without one. Never raises."""
    from autocutlass.device import current_device, gpu_available

    if not gpu_available():
        return None
    try:
        d = current_device()
    except Exception:  # noqa: BLE001 - a GPU that cannot be queried: nothing to mark
        return None
    return Here(d.gpu_name, d.cc, d.sm_count, d.dsl_version)


def _sibling_note(r: BestRecord, here: Here | None) -> str:
    """', sibling of <this GPU>' for a record another GPU model of this GPU's architecture and SM
    count measured (dispatch serves it here, marked, where this GPU has no record of its own)."""
    k = r.hard_key
    if here is None or k.gpu_name == here.gpu_name:
        return ""
    if (k.cc, k.sm_count, k.dsl_version) != (here.cc, here.sm_count, here.dsl_version):
        return ""
    return f", sibling of this {here.gpu_name}"


def _vendor_note(r: BestRecord) -> str:
    """', torch's time' for a vendor record (``autocutlass.vendor``: torch serves the problem where
    this beats our best by more than the margin), naming the variant of torch's path it timed
    (conv2d's cuDNN outside benchmark mode: ', torch's time (heuristic)')."""
    if r.family != VENDOR_FAMILY:
        return ""
    variant = variant_of(r.hard_key)
    return ", torch's time" + (f" ({variant})" if variant else "")


def _background_note(r: BestRecord) -> str:
    """', tuned in the background' for a best chosen from trials timed while the application ran."""
    return ", tuned in the background" if r.note == BACKGROUND_NOTE else ""


def cmd_show(ns: argparse.Namespace) -> int:
    """``db show [--gpu NAME] [--no-shipped] [--db URL]``: the best record of every tuned problem,
    of the user's database and (marked shipped) of the shipped ones. The GPU column names the GPU
    that measured each; on a machine with a GPU, records of a sibling GPU model (same
    architecture and SM count, e.g. an H200's on an H100), which dispatch serves here marked as a
    sibling's where this GPU has none of its own, say so in the last column, as do records tuned
    by the ``background`` policy (timed while the application ran)."""
    url = _db_url(ns)
    store = _existing_store(url)
    user: list[BestRecord] = []
    if store is None:
        print(_no_db(url))
    else:
        user = [r for r in store.bests(vendor=True) if _gpu_matches(r.hard_key.gpu_name, ns.gpu)]
    shown = [_Shown(r, "user") for r in user]
    where = [f"{len(user)} in {resolve(url).display}"]
    if ns.shipped:
        shipped, paths = _shipped_records(ns.gpu, user)
        shown += shipped
        if paths:
            where.append(f"{len(shipped)} in the shipped {', '.join(p.name for p in paths)} ({paths[0].parent})")
    which = f" of GPUs matching {ns.gpu!r}" if ns.gpu else ""
    if not shown:
        print(f"no best records{which}: {'; '.join(where)}")
        return 0
    here = _here()
    body = [
        (s.record.problem.describe(), s.record.family, config_summary(s.record.config), f"{s.record.median_ms:.4f}",
         f"{s.record.tflops:.1f}", s.record.hard_key.gpu_name,
         s.source + _background_note(s.record) + _sibling_note(s.record, here) + _vendor_note(s.record))
        for s in shown
    ]  # fmt: skip
    print_table(f"{len(shown)} best records{which}: {'; '.join(where)}", _HEADERS, body, right=lambda i: i in (3, 4))
    return 0


# ---- export, import, merge, upgrade ------------------------------------------------------------
def cmd_export(ns: argparse.Namespace) -> int:
    """``db export FILE [--db URL]``: FILE gets every record (JSON if it ends with .json)."""
    store = _existing_store(_db_url(ns))
    if store is None:
        print(f"autocutlass: error: {_no_db(_db_url(ns))}", file=sys.stderr)
        return 1
    out = export(store, ns.file)
    print(f"exported {store.display} to {out}")
    return 0


def cmd_import(ns: argparse.Namespace) -> int:
    """``db import FILE [--db URL]``: merge FILE into the database (created if new)."""
    store = TuningStore(_db_url(ns))
    stats = import_(store, ns.file)
    print(f"imported {ns.file} into {store.display}: {stats.describe()}")
    return 0


def cmd_merge(ns: argparse.Namespace) -> int:
    """``db merge A B -o C [--force] [--replace]``: C, a new file, gets the union of A and B, the
    faster best of each problem (``--replace``: B's). An existing C is replaced only with
    ``--force``. Prints what C then holds."""
    out = Path(ns.output).expanduser().resolve()
    if out.exists() and not ns.force:
        raise UsageError(f"{out} exists; db merge writes a new file: choose another -o, or add --force to replace it")
    stats = merge(ns.a, ns.b, out, replace=ns.replace)
    counts = _file_counts(out)
    total = {k: sum(c[k] for c in counts.values()) for k in ("problems", "bests", "trials")}
    print(f"merged {ns.a} and {ns.b} into {out}: it holds {total['problems']} problems tuned, "
          f"{total['bests']} best records, {total['trials']} trials")  # fmt: skip
    if len(counts) > 1:
        print("\n".join(_count_text(counts, "  ")))
    print(f"  (B's records merged into A's: {stats.describe()})")
    return 0


def cmd_prune(ns: argparse.Namespace) -> int:
    """``db prune FILE -o OUT [--force]``: OUT, a new file, holds FILE less the best records of
    older kernel sources that a record of the installed sources replaces (``transfer.pruned``; after
    ``db rekey`` and a re-tune, the shipped files keep one record of ours per problem and family)."""
    from autocutlass.db.transfer import pruned, read_file, write_snapshot
    from autocutlass.kernels import source_hashes

    out = Path(ns.output).expanduser().resolve()
    if out.exists() and not ns.force:
        raise UsageError(f"{out} exists; db prune writes a new file: choose another -o, or add --force to replace it")
    snap, bests, trials = pruned(read_file(ns.file), source_hashes())
    write_snapshot(snap, out)
    print(f"pruned {ns.file} into {out}: {bests} best record(s) of older kernel sources replaced by one of the "
          f"installed sources dropped, {trials} trial(s) of kernel sources left without a best dropped")  # fmt: skip
    return 0


def _file_counts(path: Path) -> dict[str, dict[str, int]]:
    """``counts_per_gpu`` of the SQLite file or JSON export (``.json``) at ``path``."""
    with tempfile.TemporaryDirectory(prefix="autocutlass-db-") as tmp:
        if path.suffix.lower() == ".json":  # counted from a scratch SQLite copy
            scratch = Path(tmp) / "count.sqlite"
            try:
                import_(TuningStore(scratch), path)
            finally:
                release(scratch)
            path = scratch
        try:
            return TuningStore(path, read_only=True).counts_per_gpu()
        finally:
            release(path)


def cmd_upgrade(ns: argparse.Namespace) -> int:
    """``db upgrade [--db URL]``: run the schema migrations up to this autocutlass's version."""
    url = _db_url(ns)
    before, after = upgrade(url)
    display = resolve(url).display
    if before == after:
        print(f"{display} is at schema version {after}; nothing to do")
    else:
        print(f"upgraded {display} from schema version {before} to {after}")
    return 0


# ---- readme ------------------------------------------------------------------------------------
def cmd_readme(ns: argparse.Namespace) -> int:
    """``db readme [--shipped-dir DIR] [-o FILE]``: the README of the shipped databases, generated
    from their records (``autocutlass.cli.db_readme``)."""
    from autocutlass.cli.db_readme import render_readme

    shipped_dir = Path(ns.shipped_dir).expanduser() if ns.shipped_dir else current().shipped_dbs_dir
    if shipped_dir is None:
        raise UsageError("shipped databases are off (AUTOCUTLASS_SHIPPED_DBS=off): name the directory with --shipped-dir")
    if not shipped_dir.is_dir():
        raise UsageError(f"--shipped-dir {shipped_dir}: not a directory")
    paths = shipped_db_paths(shipped_dir)
    text = render_readme(paths)
    if ns.output == "-":
        sys.stdout.write(text)
        return 0
    out = Path(ns.output).expanduser() if ns.output else shipped_dir / "README.md"
    _write_atomic(out, text)
    print(f"wrote {out} from {len(paths)} database{'s' if len(paths) != 1 else ''} in {shipped_dir}")
    return 0


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` (the usual permissions), then move it there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# ---- counts ------------------------------------------------------------------------------------
def count_lines(store: TuningStore, indent: str) -> list[str]:
    """One line per GPU name: problems tuned, best records, trials (``autocutlass info`` prints them)."""
    return _count_text(store.counts_per_gpu(), indent)


def _count_text(counts: dict[str, dict[str, int]], indent: str) -> list[str]:
    if not counts:
        return [f"{indent}no records"]
    return [
        f"{indent}{gpu}: {c['problems']} problems tuned, {c['bests']} best records, {c['trials']} trials"
        + (f", torch's time for {c['torch_times']}" if c.get("torch_times") else "")
        for gpu, c in counts.items()
    ]
