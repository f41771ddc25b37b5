"""Each tuned GEMM's best swapped (swap_ab) and best unswapped hopper_gemm trial in a tuning file, and their ratio.

Usage: python benchmarks/device/best_by_side.py FILE.sqlite
"""

import json
import sqlite3
import sys

con = sqlite3.connect(sys.argv[1])
rows = con.execute(
    "select p.dims, t.config, t.median_ms from trials t join problems p on p.id = t.problem_id "
    "where t.state = 'ok' and t.family = 'hopper_gemm'"
).fetchall()
best: dict[tuple, tuple[float, str]] = {}
for dims, cfg, ms in rows:
    c, d = json.loads(cfg), json.loads(dims)
    if "m" not in d:
        continue
    key = ((d["m"], d["n"], d["k"]), "swap" if c.get("swap_ab") else "plain")
    if ms and (key not in best or ms < best[key][0]):
        extra = " sk" if c.get("stream_k") else (f" split{c['split_k']}" if c.get("split_k", 1) > 1 else "")
        best[key] = (ms, f"{c['tile_m']}x{c['tile_n']} c{c['cluster_m']}x{c['cluster_n']}{extra}")
for shape in sorted({s for s, _ in best}):
    p, s = best.get((shape, "plain")), best.get((shape, "swap"))
    ratio = f"swap/plain x{p[0] / s[0]:.3f}" if p and s else ""
    print(shape, "plain", p, "swap", s, ratio)
