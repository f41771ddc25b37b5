"""``autocutlass info``: this machine's GPU fingerprint, the toolchain, the settings in force and
the tuning databases (the user's and the shipped ones) with their record counts per GPU.

It only reads: every database is opened read-only, so pointing ``AUTOCUTLASS_DB`` at a file
that is not (yet) a tuning database leaves the file as it was.
"""

from __future__ import annotations

import argparse
from typing import Any

from autocutlass import settings as settings_mod
from autocutlass.cli.db import count_lines
from autocutlass.db import TuningStore, resolve, shipped_db_paths
from autocutlass.errors import DatabaseError
from autocutlass.settings import Settings


def add_info_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Register ``info`` on ``subparsers``; returns its parser."""
    info: argparse.ArgumentParser = subparsers.add_parser("info", help="device fingerprint, DB location and record counts")
    info.set_defaults(func=cmd_info)
    return info


def cmd_info(ns: argparse.Namespace) -> int:
    from autocutlass.device import current_device, dsl_version, gpu_available
    from autocutlass.kernels import source_hashes

    s = settings_mod.current()
    hashes = source_hashes()
    print(f"autocutlass {_version()}")
    if gpu_available():
        d = current_device()
        print(f"GPU            {d.gpu_name} (cc {d.cc}, {d.sm_count} SMs, arch {d.arch})")
        print(f"  smem/block   {d.max_smem_per_block_optin} bytes opt-in;  L2 {d.l2_bytes // (1 << 20)} MiB;"
              f"  memory {d.total_memory_bytes / (1 << 30):.0f} GiB")
        print(f"  driver       {d.driver_version};  CUDA runtime {d.cuda_runtime_version};  torch {d.torch_version}")
        for family, h in hashes.items():
            hk = d.hard_key(h)
            print(f"  hard key     {family}: {hk.digest()}  {hk.key()}")
    else:
        print("GPU            no CUDA GPU visible to this process (torch.cuda.is_available() is False)")
    sources = ", ".join(f"{family} {h}" for family, h in hashes.items())
    print(f"toolchain      nvidia-cutlass-dsl {dsl_version()};  kernel sources {sources}")
    print(f"policy         {s.policy.value}{' (strict)' if s.strict else ''}")
    print(f"switched off   {switched_off(s) or 'nothing'}")
    print(f"kernel cache   {s.kernel_cache_dir}")
    for line in info_db_lines(s):
        print(line)
    return 0


def switched_off(s: settings_mod.Settings) -> str:
    """The gated kernel families that are off now, with the variable that turns each on
    (``kernels.ALL_GATES``)."""
    from autocutlass.kernels import ALL_GATES, gate_is_opt_out

    return ", ".join(f"{name} ({var}={'unset' if gate_is_opt_out(field) else '1'} to use it)"
                     for name, (field, var) in ALL_GATES.items() if not getattr(s, field))  # fmt: skip


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("autocutlass")
    except PackageNotFoundError:
        return "(source tree)"


def info_db_lines(settings: Settings) -> list[str]:
    """Lines for ``autocutlass info``: the user database and the shipped ones, with record counts
    per GPU. Opens every database read-only. Never raises DatabaseError: an unusable database
    gets a line saying what is wrong."""
    loc = resolve(settings.db_url)
    lines = [f"tuning database: {loc.display}"]
    if loc.sqlite_path is not None and not loc.sqlite_path.exists():
        lines.append("  not created yet (no records)")
    else:
        try:
            lines += count_lines(TuningStore(settings.db_url, read_only=True), "  ")
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
            lines += count_lines(TuningStore(path, read_only=True, immutable=True), "  ")
        except DatabaseError as e:
            lines.append(f"  unusable: {e}")
    return lines
