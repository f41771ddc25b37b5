"""`autocutlass ...`: a thin command line over the library's layers.

    autocutlass info                      device fingerprint, DB location and record counts
    autocutlass db show|export|import|merge|upgrade
    autocutlass kernels list|compile      kernel families; GPU-free compile checks
    autocutlass tune --shapes FILE        tune problems into the database
    autocutlass bench --shapes FILE       side-by-side benchmark against torch
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from autocutlass import settings as settings_mod


def cmd_info(ns: argparse.Namespace) -> int:
    from autocutlass.cli_db import info_db_lines
    from autocutlass.device import current_device, dsl_version, gpu_available, kernel_source_hash

    s = settings_mod.current()
    print(f"autocutlass {_version()}")
    if gpu_available():
        d = current_device()
        print(f"GPU            {d.gpu_name} (cc {d.cc}, {d.sm_count} SMs, arch {d.arch})")
        print(f"  smem/block   {d.max_smem_per_block_optin} bytes opt-in;  L2 {d.l2_bytes // (1 << 20)} MiB;"
              f"  memory {d.total_memory_bytes / (1 << 30):.0f} GiB")
        print(f"  driver       {d.driver_version};  CUDA runtime {d.cuda_runtime_version};  torch {d.torch_version}")
        print(f"  hard key     {d.hard_key().digest()}  {d.hard_key().key()}")
    else:
        print("GPU            no CUDA GPU visible to this process (torch.cuda.is_available() is False)")
    print(f"toolchain      nvidia-cutlass-dsl {dsl_version()};  kernel sources {kernel_source_hash()}")
    print(f"policy         {s.policy.value}{' (strict)' if s.strict else ''}")
    print(f"kernel cache   {s.kernel_cache_dir}")
    for line in info_db_lines(s):
        print(line)
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("autocutlass")
    except PackageNotFoundError:
        return "(source tree)"


def build_parser() -> argparse.ArgumentParser:
    from autocutlass.cli_db import add_db_parser
    from autocutlass.cli_kernels import add_kernels_parser
    from autocutlass.cli_tune import add_tune_parser

    parser = argparse.ArgumentParser(prog="autocutlass", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="cmd", required=True)
    info = sub.add_parser("info", help="device fingerprint, DB location and record counts")
    info.set_defaults(func=cmd_info)
    add_db_parser(sub)
    add_kernels_parser(sub)
    add_tune_parser(sub)
    _add_bench(sub)
    return parser


def _add_bench(sub: argparse._SubParsersAction[Any]) -> None:
    try:
        from autocutlass.cli_bench import add_bench_parser
    except ImportError:
        return
    add_bench_parser(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    level = logging.INFO if ns.verbose else getattr(logging, settings_mod.current().log_level, logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    return int(ns.func(ns))


if __name__ == "__main__":
    sys.exit(main())
