"""`autocutlass ...`: a thin command line over the library's layers.

    autocutlass info                      device fingerprint, DB location and record counts
    autocutlass db show|export|import|merge|upgrade|readme
    autocutlass kernels list|compile      kernel families; GPU-free compile checks
    autocutlass tune --shapes FILE        tune problems into the database
    autocutlass bench --shapes FILE       side-by-side benchmark against torch

Exit codes: 0 success; 1 a failed run (a bad shapes file, a FAILED case, a failed compile) or an
unusable database; 2 a user error (bad arguments, a bad AUTOCUTLASS_* value, no CUDA GPU for a
command that needs one), reported on one line without a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from autocutlass import settings as settings_mod
from autocutlass.cli.common import USER_ERROR, OneLineParser, UsageError
from autocutlass.errors import DatabaseError, NoGPU

# One module per command group: info, db (+ db_readme), kernels, tune, bench/ (cases, report,
# plot, measure); common holds what they share, shapes the shapes-file format.

USER_ERRORS = (UsageError, settings_mod.SettingsError, NoGPU)
"""What ``main`` reports as a user error: one line on stderr, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    from autocutlass.cli.db import add_db_parser
    from autocutlass.cli.info import add_info_parser
    from autocutlass.cli.kernels import add_kernels_parser
    from autocutlass.cli.tune import add_tune_parser

    parser = OneLineParser(prog="autocutlass", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_info_parser(sub)
    add_db_parser(sub)
    add_kernels_parser(sub)
    add_tune_parser(sub)
    _add_bench(sub)
    return parser


def _add_bench(sub: argparse._SubParsersAction[Any]) -> None:
    try:
        from autocutlass.cli.bench import add_bench_parser
    except ImportError:
        return
    add_bench_parser(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the command, return its exit code. User errors (``USER_ERRORS``) and
    database errors raised by a command are printed as one ``autocutlass: error: ...`` line on
    stderr and return 2 and 1; anything else is a bug and propagates."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        level = logging.INFO if ns.verbose else getattr(logging, settings_mod.current().log_level, logging.WARNING)
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
        return int(ns.func(ns))
    except USER_ERRORS as e:
        print(f"autocutlass: error: {e}", file=sys.stderr)
        return USER_ERROR
    except DatabaseError as e:
        print(f"autocutlass: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # stdout piped into a reader that stopped (| head): not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 1
