"""``autocutlass db ...`` and the database lines of ``autocutlass info``; thin over ``autocutlass.db``.

``add_db_parser(subparsers)`` registers ``db`` with the subcommands ``show``, ``export``,
``import``, ``merge`` and ``upgrade``. Each subcommand sets ``func`` to its handler: a function
of the parsed namespace returning the exit code (0 success, 1 database error; argparse itself
exits with 2 on bad usage). Handlers print a DatabaseError's message to stderr and return 1;
any other exception is a bug and propagates.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocutlass.db import BestRecord, TuningStore, export, import_, merge, resolve, shipped_db_paths, upgrade
from autocutlass.errors import DatabaseError
from autocutlass.settings import Settings, current


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

    show = sub.add_parser("show", parents=[with_db], help="table of the best record of every tuned problem")
    show.add_argument("--gpu", metavar="NAME", default=None, help="only records of this GPU name")
    show.set_defaults(func=cmd_show)

    exp = sub.add_parser("export", parents=[with_db], help="write the database to FILE (.json: JSON, else SQLite)")
    exp.add_argument("file", metavar="FILE")
    exp.set_defaults(func=cmd_export)

    imp = sub.add_parser("import", parents=[with_db], help="merge FILE (SQLite or JSON export) into the database")
    imp.add_argument("file", metavar="FILE")
    imp.set_defaults(func=cmd_import)

    mrg = sub.add_parser("merge", help="merge files A and B into C (faster best wins, no trial lost)")
    mrg.add_argument("a", metavar="A")
    mrg.add_argument("b", metavar="B")
    mrg.add_argument("-o", "--output", dest="output", metavar="C", required=True)
    mrg.set_defaults(func=cmd_merge)

    upg = sub.add_parser("upgrade", parents=[with_db], help="upgrade the database to this autocutlass's schema")
    upg.set_defaults(func=cmd_upgrade)
    return db


def _db_url(ns: argparse.Namespace) -> str:
    url: str | None = getattr(ns, "db", None)
    return url if url else current().db_url


def _fail(err: DatabaseError) -> int:
    print(f"autocutlass: error: {err}", file=sys.stderr)
    return 1


def _existing_store(url: str) -> TuningStore | None:
    """The store at ``url``, or None when it is a SQLite file not created yet."""
    loc = resolve(url)
    if loc.sqlite_path is not None and not loc.sqlite_path.exists():
        return None
    return TuningStore(url)


def _no_db(url: str) -> str:
    return f"no tuning database at {resolve(url).display} yet (nothing has been tuned)"


def config_summary(config: dict[str, Any], width: int = 60) -> str:
    """``key=value`` pairs in key order, cut to ``width`` characters."""
    text = " ".join(f"{k}={v}" for k, v in sorted(config.items()))
    return text if len(text) <= width else text[: width - 1] + "…"


_HEADERS = ("problem", "family", "config", "median ms", "TFLOP/s", "GPU")


def _rows(records: Sequence[BestRecord]) -> list[tuple[str, ...]]:
    return [
        (
            r.problem.describe(),
            r.family,
            config_summary(r.config),
            f"{r.median_ms:.4f}",
            f"{r.tflops:.1f}",
            r.hard_key.gpu_name,
        )
        for r in records
    ]


def _print_table(title: str, rows: list[tuple[str, ...]]) -> None:
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for i, h in enumerate(_HEADERS):
            table.add_column(h, justify="right" if i in (3, 4) else "left")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_HEADERS)]
    print(title)
    print("  ".join(h.ljust(w) for h, w in zip(_HEADERS, widths, strict=True)).rstrip())
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def cmd_show(ns: argparse.Namespace) -> int:
    """``db show [--gpu NAME] [--db URL]``: the best record of every tuned problem."""
    try:
        store = _existing_store(_db_url(ns))
        if store is None:
            print(_no_db(_db_url(ns)))
            return 0
        records = store.bests(gpu=ns.gpu)
    except DatabaseError as e:
        return _fail(e)
    if not records:
        which = f" for GPU {ns.gpu!r}" if ns.gpu else ""
        print(f"no best records{which} in {store.display}")
        return 0
    _print_table(f"{len(records)} best records in {store.display}", _rows(records))
    return 0


def cmd_export(ns: argparse.Namespace) -> int:
    """``db export FILE [--db URL]``: FILE gets every record (JSON if it ends with .json)."""
    try:
        store = _existing_store(_db_url(ns))
        if store is None:
            print(f"autocutlass: error: {_no_db(_db_url(ns))}", file=sys.stderr)
            return 1
        out = export(store, ns.file)
    except DatabaseError as e:
        return _fail(e)
    print(f"exported {store.display} to {out}")
    return 0


def cmd_import(ns: argparse.Namespace) -> int:
    """``db import FILE [--db URL]``: merge FILE into the database (created if new)."""
    store = TuningStore(_db_url(ns))
    try:
        stats = import_(store, ns.file)
    except DatabaseError as e:
        return _fail(e)
    print(f"imported {ns.file} into {store.display}: {stats.describe()}")
    return 0


def cmd_merge(ns: argparse.Namespace) -> int:
    """``db merge A B -o C``: C gets the union of A and B, the faster best of each problem."""
    try:
        stats = merge(ns.a, ns.b, ns.output)
    except DatabaseError as e:
        return _fail(e)
    print(f"merged {ns.a} and {ns.b} into {Path(ns.output).expanduser().resolve()}: {stats.describe()}")
    return 0


def cmd_upgrade(ns: argparse.Namespace) -> int:
    """``db upgrade [--db URL]``: run the schema migrations up to this autocutlass's version."""
    url = _db_url(ns)
    try:
        before, after = upgrade(url)
    except DatabaseError as e:
        return _fail(e)
    display = resolve(url).display
    if before == after:
        print(f"{display} is at schema version {after}; nothing to do")
    else:
        print(f"upgraded {display} from schema version {before} to {after}")
    return 0


def _count_lines(store: TuningStore, indent: str) -> list[str]:
    counts = store.counts_per_gpu()
    if not counts:
        return [f"{indent}no records"]
    return [
        f"{indent}{gpu}: {c['problems']} problems tuned, {c['bests']} best records, {c['trials']} trials"
        for gpu, c in counts.items()
    ]


def info_db_lines(settings: Settings) -> list[str]:
    """Lines for ``autocutlass info``: the user database and the shipped ones, with record counts
    per GPU. Never raises DatabaseError: an unusable database gets a line saying what is wrong."""
    loc = resolve(settings.db_url)
    lines = [f"tuning database: {loc.display}"]
    if loc.sqlite_path is not None and not loc.sqlite_path.exists():
        lines.append("  not created yet (no records)")
    else:
        try:
            lines += _count_lines(TuningStore(settings.db_url), "  ")
        except DatabaseError as e:
            lines.append(f"  unusable: {e}")
    shipped = shipped_db_paths(settings.shipped_dbs_dir)
    if settings.shipped_dbs_dir is None:
        lines.append("shipped databases: off")
    elif not shipped:
        lines.append(f"shipped databases: none in {settings.shipped_dbs_dir}")
    for path in shipped:
        lines.append(f"shipped database: {path}")
        try:
            lines += _count_lines(TuningStore(path, read_only=True, immutable=True), "  ")
        except DatabaseError as e:
            lines.append(f"  unusable: {e}")
    return lines
