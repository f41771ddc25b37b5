"""What opening the tuning databases and a first lookup cost a fresh process, with the lookups
read through the standard library (``db.sqlite_read``, the default) or through SQLAlchemy
(``AUTOCUTLASS_DB_SQLITE_READS=0``). CPU only: no GPU, no kernel.

Each round runs two fresh interpreters per mode (interleaved, the order alternating): ``import
torch``; ``import autocutlass``; then dispatch's own ``open_store`` (a new user database over the
shipped ``tuning_dbs/``) and a lookup of every shipped problem under its hard key. Reported per
mode: medians of the open, the first lookup, the rest of the lookups, and whether SQLAlchemy was
imported.

    python benchmarks/probes/db_open_probe.py --rounds 5 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, os, sqlite3, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import autocutlass
from autocutlass import dispatch, settings
from autocutlass.db.records import hard_key_from_json
from autocutlass.ops.registry import problem_from_dict
t2 = time.perf_counter()
shipped = os.path.join(sys.argv[1], "tuning_dbs", "NVIDIA-H200.sqlite")
rows = sqlite3.connect(shipped).execute(
    "SELECT p.problem, d.hard_key FROM best b JOIN problems p ON p.id = b.problem_id JOIN devices d ON d.id = b.device_id")
queries = [(problem_from_dict(json.loads(p)), hard_key_from_json(k)) for p, k in rows]
t3 = time.perf_counter()
store, _sink = dispatch._real_layers().open_store(settings.current())
t4 = time.perf_counter()
first = store.lookup(*queries[0])
t5 = time.perf_counter()
found = sum(store.lookup(p, k) is not None for p, k in queries[1:]) + (first is not None)
t6 = time.perf_counter()
print(json.dumps({"import_torch_s": t1 - t0, "import_autocutlass_s": t2 - t1, "open_s": t4 - t3,
                  "first_lookup_s": t5 - t4, "other_lookups_s": t6 - t5, "lookups": len(queries),
                  "found": found, "sqlalchemy_imported": "sqlalchemy" in sys.modules}))
"""


def run(mode: str, work: Path) -> dict[str, float]:
    env = {**os.environ, "AUTOCUTLASS_DB": str(work / f"user-{mode}-{os.urandom(4).hex()}.sqlite"),
           "AUTOCUTLASS_SHIPPED_DBS": str(REPO / "tuning_dbs"), "AUTOCUTLASS_DB_SQLITE_READS": "1" if mode == "sqlite3" else "0"}  # fmt: skip
    r = subprocess.run([sys.executable, "-c", _CHILD, str(REPO)], env=env, cwd=REPO, capture_output=True, text=True,
                       timeout=300, check=True)  # fmt: skip
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    modes = ("sqlite3", "sqlalchemy")
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for mode in modes if i % 2 == 0 else modes[::-1]:
                for _ in range(2):
                    runs[mode].append(run(mode, Path(tmp)))
    keys = ("import_torch_s", "import_autocutlass_s", "open_s", "first_lookup_s", "other_lookups_s")
    summary = {m: {k: statistics.median(r[k] for r in rs) for k in keys} | {
        "lookups": rs[0]["lookups"], "found": rs[0]["found"], "sqlalchemy_imported": rs[0]["sqlalchemy_imported"]}
        for m, rs in runs.items()}  # fmt: skip
    print(f"{'lookups via':12} " + " ".join(f"{k[:-2]:>20}" for k in keys) + "  sqlalchemy imported")
    for m, s in summary.items():
        print(f"{m:12} " + " ".join(f"{s[k]:20.4f}" for k in keys) + f"  {s['sqlalchemy_imported']}"
              f"  ({s['found']}/{s['lookups']} found)")
    if args.json:
        args.json.write_text(json.dumps({"machine": platform.node(), "cpu_count": os.cpu_count(),
                                         "python": platform.python_version(), "median_s": summary, "runs": runs},
                                        indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
