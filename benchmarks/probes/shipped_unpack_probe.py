"""Probe (no GPU): what a fresh process pays to get the shipped compiled objects of its first N
kernels out of ``tuning_dbs/kernels.tar.xz`` into an empty kernel cache, member by member (an xz
stream cannot seek: each member read decompresses the archive up to it; what the object cache did
before session 16) against one unpacking pass (``object_cache.unpack_archive``, what it does now).
Medians of 5 fresh cache directories each, interleaved.

    python benchmarks/probes/shipped_unpack_probe.py [N ...]
"""

from __future__ import annotations

import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from autocutlass.kernels.object_cache import unpack_archive

ARCHIVE = Path(__file__).resolve().parents[2] / "tuning_dbs" / "kernels.tar.xz"


def member_by_member(names: list[str], dest: Path) -> None:
    for name in names:
        with tarfile.open(ARCHIVE, "r:xz") as tar:
            f = tar.extractfile(name)
            assert f is not None
            (dest / name).write_bytes(f.read())


def one_pass(names: list[str], dest: Path) -> None:
    unpack_archive(ARCHIVE, dest)
    assert all((dest / n).is_file() for n in names)


def main(argv: list[str]) -> int:
    counts = [int(a) for a in argv] or [1, 4, 16]
    with tarfile.open(ARCHIVE, "r:xz") as tar:
        everything = sorted(m.name for m in tar.getmembers() if m.name.endswith(".o"))
    print(f"{ARCHIVE.name}: {len(everything)} objects, {ARCHIVE.stat().st_size / 1e6:.2f} MB compressed")
    for n in counts:
        names = everything[:: max(1, len(everything) // n)][:n]
        per: dict[str, list[float]] = {"member by member": [], "one pass": []}
        for r in range(5):
            for label, f in (("member by member", member_by_member), ("one pass", one_pass))[:: 1 if r % 2 == 0 else -1]:
                with tempfile.TemporaryDirectory() as d:
                    t = time.perf_counter()
                    f(names, Path(d))
                    per[label].append(time.perf_counter() - t)
        a, b = (statistics.median(per[k]) for k in ("member by member", "one pass"))
        print(f"first {n:3d} kernels: member by member {a * 1e3:7.1f} ms, one pass {b * 1e3:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
