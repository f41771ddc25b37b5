"""Probe: where does the grouped kernel lose on large experts (Mixtral, T >= 4096: x0.77-0.83 of
torch._grouped_mm on an H100)? Times, in one process with the L2 flushed, one expert's dense GEMM
(M = T / E rows, torch.matmul and the GEMM family under cluster 1x1 / 2x1 and direct / TMA
stores) and the whole grouped GEMM (torch._grouped_mm and the grouped family's configs: alone
and in clusters, stored from registers or through TMA). Found (2026-11-27): the dense GEMM at
128x256x64 lost about 12% storing from registers and gained 7-10% in a cluster of two; the
grouped kernel, which had neither, got both.

GPU machine: python benchmarks/probes/grouped_cluster_probe.py [--t 16384] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--t", default="16384,4096", help="token rows, comma-separated (the dense part uses the first)")
    ap.add_argument("--n", type=int, default=14336)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--grouped-configs", default="", help="extra grouped configs, 'tm,tn,tk,raster,schedule[,cm,cn]';...")
    ap.add_argument("--no-dense", action="store_true", help="skip the one-expert dense GEMM part")
    ap.add_argument("--json", default=None)
    ns = ap.parse_args(argv)

    from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily
    from autocutlass.kernels.hopper_grouped import HopperGroupedConfig as G
    from autocutlass.kernels.hopper_grouped import HopperGroupedFamily
    from autocutlass.ops.gemm.problem import GemmProblem, Major
    from autocutlass.ops.grouped.problem import GroupedGemmProblem
    from autocutlass.search.timing import time_callable

    flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
    ts = [int(v) for v in ns.t.split(",")]
    e, t, n, k = ns.experts, ts[0], ns.n, ns.k
    m = t // e
    rows: list[dict[str, Any]] = []

    def record(what: str, ms: float, flops: float) -> None:
        rows.append({"what": what, "ms": ms, "tflops": flops / ms / 1e9})
        print(f"{what:44s} {ms:8.4f} ms {flops / ms / 1e9:7.1f} TF/s", flush=True)

    # One expert's dense GEMM: x (m, k) @ w^T, w (n, k) K-major.
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(n, k, device="cuda").bfloat16().t()
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    f1 = 2.0 * m * n * k
    record(f"dense {m}x{n}x{k} torch.matmul", time_callable(lambda: torch.matmul(a, b), flush_bytes=flush).median_ms, f1)
    fam = HopperGemmFamily(cache_dir=None)
    p = GemmProblem(m=m, n=n, k=k, b_major=Major.COL)
    dense = (C(128, 256, 64, store="direct"), C(128, 256, 64), C(128, 256, 64, 2, 1, store="direct"),
             C(128, 256, 64, 2, 1), C(128, 256, 64, 1, 2), C(128, 256, 64, 1, 2, store="direct"),
             C(128, 128, 64, 2, 1, schedule="pingpong"))
    for cfg in () if ns.no_dense else dense:
        try:
            r = fam.compile(cfg, p)
            record(f"dense {cfg.short()}", time_callable(lambda: r(a, b, d), flush_bytes=flush).median_ms, f1)
        except Exception as exc:  # a config the probe guessed wrong: say so, go on
            print(f"dense {cfg.short()}: {type(exc).__name__}: {exc}"[:300], flush=True)

    # The grouped GEMM, balanced routing, at each T (one runner per config serves every T).
    gfam = HopperGroupedFamily(cache_dir=None)
    gp = GroupedGemmProblem(experts=e, t=t, n=n, k=k, w_major=Major.COL)
    cfgs = [G(128, 256, 64), G(128, 256, 64, store="tma"), G(128, 256, 64, cluster_n=2),
            G(128, 256, 64, cluster_n=2, store="tma"), G(128, 256, 64, cluster_m=2, store="tma"),
            G(128, 128, 64, schedule="pingpong", cluster_n=2, store="tma")]
    for spec in filter(None, ns.grouped_configs.split(";")):
        parts = spec.split(",")
        kw: dict[str, Any] = dict(tile_m=int(parts[0]), tile_n=int(parts[1]), tile_k=int(parts[2]),
                                  raster=parts[3], schedule=parts[4])  # fmt: skip
        if len(parts) > 6:
            kw["cluster_m"], kw["cluster_n"] = int(parts[5]), int(parts[6])
        cfgs.append(G(**kw))
    runners: dict[Any, Any] = {}
    w = torch.randn(e, n, k, device="cuda").bfloat16()
    wt = w.transpose(-2, -1)
    for t in ts:
        x = torch.randn(t, k, device="cuda").bfloat16()
        offs = torch.arange(1, e + 1, device="cuda", dtype=torch.int32) * (t // e)
        out = torch.empty(t, n, device="cuda", dtype=torch.bfloat16)
        fg = 2.0 * t * n * k
        record(f"T={t} grouped torch._grouped_mm",
               time_callable(lambda: torch._grouped_mm(x, wt, offs), flush_bytes=flush).median_ms, fg)
        ref = torch._grouped_mm(x, wt, offs)
        for cfg in cfgs:
            why = gfam.check(cfg, gp)
            if why:
                print(f"grouped {cfg.short()}: infeasible: {why}", flush=True)
                continue
            try:
                if cfg not in runners:
                    runners[cfg] = gfam.compile(cfg, gp)
                r = runners[cfg]
                out.fill_(float("nan"))
                r(x, wt, offs, out)
                err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                ms = time_callable(lambda: r(x, wt, offs, out), flush_bytes=flush).median_ms
                record(f"T={t} grouped {cfg.short()} (err {err:.1e})", ms, fg)
            except Exception as exc:
                print(f"grouped {cfg.short()}: {type(exc).__name__}: {exc}"[:300], flush=True)
    if ns.json:
        with open(ns.json, "w") as fh:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "E": e, "T": t, "N": n,
                       "K": k, "T_all": ts, "rows": rows}, fh, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
