"""`autocutlass kernels list | compile`: kernel discovery and GPU-free compile checks."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from typing import Any

from autocutlass.ops.gemm.problem import DType, Epilogue, Major, GemmProblem


def add_kernels_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("kernels", help="kernel families: their spaces, and compile checks")
    sub = p.add_subparsers(dest="kernels_cmd", required=True)
    ls = sub.add_parser("list", help="families, their config axes and space sizes")
    ls.set_defaults(func=cmd_list)
    comp = sub.add_parser("compile", help="compile configs of a family without a GPU (CUTE_DSL_ARCH)")
    comp.add_argument("--arch", default="sm_90a", help="target architecture (default sm_90a)")
    comp.add_argument("--family", default="hopper_gemm")
    comp.add_argument("--limit", type=int, default=None, help="compile at most N feasible configs (sampled)")
    comp.add_argument("--seed", type=int, default=0, help="sampling seed")
    comp.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "tf32", "e4m3"])
    comp.add_argument("--shape", default="8192x8192x8192",
                      help="MxNxK of the problem the space is built for (small outputs add split-K configs)")
    comp.add_argument("--layout", default="nt", help="A/B layout letters as in shapes.json ('nn', 'nt', 'tn', 'tt')")
    comp.add_argument("--workers", type=int, default=1, help="compile in N GPU-blind processes")
    comp.add_argument("--filter", action="append", default=[], type=_field_filter, metavar="FIELD=V1[,V2..]",
                      help="keep configs whose FIELD is one of the values, e.g. swap_ab=true or tile_n=16,32 "
                           "(repeatable; all must hold)")  # fmt: skip
    comp.set_defaults(func=cmd_compile)
    return p


def _field_filter(text: str) -> tuple[str, frozenset[str]]:
    field, sep, values = text.partition("=")
    if not sep or not field.strip() or not values.strip():
        raise argparse.ArgumentTypeError(f"expected FIELD=V1[,V2..], got {text!r}")
    return field.strip(), frozenset(v.strip().lower() for v in values.split(",") if v.strip())


def keep_config(config: dict[str, Any], filters: list[tuple[str, frozenset[str]]]) -> bool:
    """Whether a config dict passes every ``--filter`` (values compared as lower-case text)."""
    for field, values in filters:
        if field not in config:
            raise ValueError(f"--filter: the family's configs have no field {field!r}; fields: {sorted(config)}")
        if str(config[field]).lower() not in values:
            return False
    return True


_OUTPUT_OF = {DType.TF32: DType.FP32, DType.E4M3: DType.BF16}
"""D's dtype for inputs whose own type is not an output type (tf32 writes fp32, fp8 writes bf16)."""


def representative_problem(dtype: str = "bf16", layout: str = "nt", shape: str = "8192x8192x8192") -> GemmProblem:
    """A problem of the given class (large by default): every config of the family is judged on it."""
    letters = {"n": Major.ROW, "t": Major.COL}
    dt = DType(dtype)
    m, n, k = (int(x) for x in shape.lower().split("x"))
    return GemmProblem(
        m=m, n=n, k=k, a_dtype=dt, b_dtype=dt, d_dtype=_OUTPUT_OF.get(dt, dt),
        a_major=letters[layout[0]], b_major=letters[layout[1]], epilogue=Epilogue(),
    )


def cmd_list(ns: argparse.Namespace) -> int:
    from autocutlass.kernels import family_names, get_family

    for name in family_names():
        fam = get_family(name)
        print(f"{name}")
        for layout in ("nn", "nt", "tn", "tt"):
            prob = representative_problem("bf16", layout)
            space = fam.space(prob)
            reasons: Counter[str] = Counter()
            ok = 0
            for cfg in space:
                r = fam.check(cfg, prob)
                if r is None:
                    ok += 1
                else:
                    reasons[r.split(":")[0].split(" (")[0][:60]] += 1
            print(f"  bf16 {layout}: {len(space)} configs in the tuning space, {ok} feasible")
            if layout == "nt":
                for reason, n in reasons.most_common(5):
                    print(f"      rejected {n:5d}: {reason}")
        cfg0 = space[0]
        axes = ", ".join(f"{k}" for k in fam.config_to_dict(cfg0))
        print(f"  axes: {axes}")
    return 0


def cmd_compile(ns: argparse.Namespace) -> int:
    os.environ["CUTE_DSL_ARCH"] = ns.arch
    from autocutlass.errors import KernelCompileError
    from autocutlass.kernels import get_family

    fam = get_family(ns.family)
    prob = representative_problem(ns.dtype, ns.layout, ns.shape)
    feasible = [c for c in fam.space(prob) if fam.check(c, prob) is None]
    try:
        feasible = [c for c in feasible if keep_config(fam.config_to_dict(c), ns.filter)]
    except ValueError as e:
        print(f"autocutlass kernels compile: error: {e}", file=sys.stderr)
        return 2
    if ns.limit is not None and ns.limit < len(feasible):
        feasible = random.Random(ns.seed).sample(feasible, ns.limit)
    t0 = time.perf_counter()
    ok = 0
    failed: list[str] = []
    if ns.workers > 1:
        import concurrent.futures as cf
        import multiprocessing as mp

        jobs = [(ns.arch, ns.family, fam.config_to_dict(c), prob.as_dict()) for c in feasible]
        with cf.ProcessPoolExecutor(ns.workers, mp_context=mp.get_context("spawn")) as pool:
            for label, err in pool.map(_compile_job, jobs, chunksize=4):
                if err is None:
                    ok += 1
                else:
                    failed.append(label)
                    print(f"FAILED {label}: {err[:300]}")
    else:
        for cfg in feasible:
            try:
                fam.compile(cfg, prob)
                ok += 1
            except KernelCompileError as e:
                failed.append(str(cfg))
                print(f"FAILED {cfg}: {str(e)[:300]}")
    dt = time.perf_counter() - t0
    print(f"compiled {ok}/{len(feasible)} {ns.family} configs for {ns.arch} ({ns.dtype} {ns.layout}) "
          f"in {dt:.1f} s ({dt / max(1, len(feasible)):.2f} s each)")
    return 0 if not failed else 1


def _compile_job(job: tuple[str, str, dict[str, Any], dict[str, Any]]) -> tuple[str, str | None]:
    """Worker: compile one config (GPU-blind) into the kernel cache; (label, error or None)."""
    arch, family, cfg_dict, prob_dict = job
    os.environ["CUTE_DSL_ARCH"] = arch
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from autocutlass.errors import KernelCompileError
    from autocutlass.kernels import get_family

    fam = get_family(family)
    cfg = fam.config_from_dict(cfg_dict)
    try:
        fam.compile(cfg, GemmProblem.from_dict(prob_dict))
        return str(cfg), None
    except KernelCompileError as e:
        return str(cfg), str(e)
