"""`autocutlass kernels list | compile | warm`: kernel discovery and GPU-free compile checks
(``warm``, in ``kernels_warm``: the stored records' kernels compiled into the kernel cache).

``kernels compile`` builds the tuning space of one problem class (``--dtype``, ``--layout``,
``--shape``), keeps the feasible configs (and those ``--filter`` keeps, ``--limit`` of them
sampled) and compiles each for ``--arch`` without a GPU, in ``--workers`` processes. Progress goes
to stderr (a bar on a terminal, else a line every ``PROGRESS_EVERY`` configs), each failure to
stdout, and a summary line last. Exit code 0 when every config compiled, 1 when any failed, 2 for
a class the family does not serve (e.g. fp8 'e4m3' in a layout other than 'nt').
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from autocutlass.cli.common import Progress, UsageError, positive_int
from autocutlass.ops.gemm.problem import DType, Epilogue, GemmProblem, Major

ARCHS = ("sm_90a",)
"""Targets the kernel families compile for."""

LAYOUTS = ("nn", "nt", "tn", "tt")
"""A/B layout letters as in shapes.json: 'n' row-major (K contiguous for A), 't' transposed."""

PROGRESS_EVERY = 10
"""Off a terminal, a progress line every this many configs."""


def add_kernels_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser("kernels", help="kernel families: their spaces, and compile checks")
    sub = p.add_subparsers(dest="kernels_cmd", required=True)
    ls = sub.add_parser("list", help="families, their config axes and space sizes")
    ls.set_defaults(func=cmd_list)
    comp = sub.add_parser("compile", help="compile configs of a family without a GPU (CUTE_DSL_ARCH)")
    comp.add_argument("--arch", default="sm_90a", choices=ARCHS, help="target architecture (default sm_90a)")
    comp.add_argument("--family", default="hopper_gemm")
    comp.add_argument("--limit", type=positive_int, default=None, help="compile at most N feasible configs (sampled)")
    comp.add_argument("--seed", type=int, default=0, help="sampling seed")
    comp.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "tf32", "e4m3"])
    comp.add_argument("--shape", default="8192x8192x8192", type=_shape, metavar="MxNxK",
                      help="the problem the space is built for (small outputs add split-K configs)")  # fmt: skip
    comp.add_argument("--layout", default="nt", choices=LAYOUTS,
                      help="A/B layout letters as in shapes.json (fp8 'e4m3': only 'nt')")  # fmt: skip
    comp.add_argument("--experts", type=positive_int, default=128, metavar="E",
                      help="--family hopper_grouped: experts of the grouped class (--shape is then TxNxK)")  # fmt: skip
    comp.add_argument("--workers", type=positive_int, default=1, help="compile in N GPU-blind processes")
    comp.add_argument("--filter", action="append", default=[], type=_field_filter, metavar="FIELD=V1[,V2..]",
                      help="keep configs whose FIELD is one of the values, e.g. swap_ab=true or tile_n=16,32 "
                           "(repeatable; all must hold)")  # fmt: skip
    comp.set_defaults(func=cmd_compile)
    from autocutlass.cli.kernels_warm import add_warm_parser

    add_warm_parser(sub)
    return p


def _shape(text: str) -> str:
    """argparse type: ``MxNxK``, three positive integers (returned lower-case)."""
    parts = text.strip().lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected MxNxK (three positive integers, e.g. 4096x4096x4096), got {text!r}")
    return "x".join(parts)


def _field_filter(text: str) -> tuple[str, frozenset[str]]:
    field, sep, values = text.partition("=")
    if not sep or not field.strip() or not values.strip():
        raise argparse.ArgumentTypeError(f"expected FIELD=V1[,V2..], got {text!r}")
    return field.strip(), frozenset(v.strip().lower() for v in values.split(",") if v.strip())


def keep_config(config: dict[str, Any], filters: list[tuple[str, frozenset[str]]]) -> bool:
    """Whether a config dict passes every ``--filter`` (values compared as lower-case text).
    Raises UsageError naming a field the family's configs do not have."""
    for field, values in filters:
        if field not in config:
            raise UsageError(f"--filter: the family's configs have no field {field!r}; fields: {sorted(config)}")
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
    )  # fmt: skip


def representative_for(family: str, ns: argparse.Namespace) -> Any:
    """The problem ``kernels compile`` judges ``family``'s configs on (``--dtype``, ``--layout``,
    ``--shape``; a grouped class for hopper_grouped, ``--experts`` experts)."""
    if family != "hopper_grouped":
        return representative_problem(ns.dtype, ns.layout, ns.shape)
    from autocutlass.ops.grouped.problem import GroupedGemmProblem

    t, n, k = (int(x) for x in ns.shape.lower().split("x"))
    dt = DType(ns.dtype)
    return GroupedGemmProblem(experts=ns.experts, t=t, n=n, k=k, x_dtype=dt, w_dtype=dt, out_dtype=_OUTPUT_OF.get(dt, dt),
                              w_major=Major.COL if ns.layout[1] == "t" else Major.ROW)  # fmt: skip


def cmd_list(ns: argparse.Namespace) -> int:
    from autocutlass.kernels import family_names, get_family

    for name in family_names():
        fam = get_family(name)
        print(f"{name}")
        space: Sequence[Any] = []
        for layout in LAYOUTS:
            prob = representative_for(name, argparse.Namespace(dtype="bf16", layout=layout, shape="8192x8192x8192",
                                                               experts=128))  # fmt: skip
            why = fam.supports(prob)
            if why is not None:
                print(f"  bf16 {layout}: not served ({why})")
                continue
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
        if space:
            print(f"  axes: {', '.join(fam.config_to_dict(space[0]))}")
    return 0


def _family(name: str) -> Any:
    from autocutlass.kernels import family_names, get_family

    if name not in family_names():
        raise UsageError(f"--family {name}: no such kernel family; known: {', '.join(family_names())}")
    return get_family(name)


def cmd_compile(ns: argparse.Namespace) -> int:
    os.environ["CUTE_DSL_ARCH"] = ns.arch
    fam = _family(ns.family)
    prob = representative_for(ns.family, ns)
    why = fam.supports(prob)
    if why is not None and ns.family != "hopper_grouped":
        served = [lay for lay in LAYOUTS if fam.supports(representative_problem(ns.dtype, lay, ns.shape)) is None]
        hint = f"; for {ns.dtype} use --layout {' or '.join(served)}" if served else f"; it serves no {ns.dtype} layout"
        raise UsageError(f"{ns.family} does not serve {ns.dtype} --layout {ns.layout}: {why}{hint}")
    if why is not None:
        raise UsageError(f"{ns.family} does not serve {prob.describe()}: {why}")
    feasible = [c for c in fam.space(prob) if fam.check(c, prob) is None]
    feasible = [c for c in feasible if keep_config(fam.config_to_dict(c), ns.filter)]
    if ns.limit is not None and ns.limit < len(feasible):
        feasible = random.Random(ns.seed).sample(feasible, ns.limit)
    what = f"{ns.family} configs for {ns.arch} ({ns.dtype} {ns.layout} {ns.shape})"
    t0 = time.perf_counter()
    ok, failed = 0, 0
    with Progress(unit="config", every=PROGRESS_EVERY) as progress:
        progress.start(f"compile {ns.family} {ns.dtype} {ns.layout} {ns.shape}", total=len(feasible))
        outcomes = _compile_pool(ns, fam, feasible, prob) if ns.workers > 1 else _compile_here(fam, feasible, prob)
        for label, err in outcomes:
            if err is None:
                ok += 1
            else:
                failed += 1
                print(f"FAILED {label}: {err[:300]}", flush=True)
            progress.update(ok + failed, failed=failed)
    dt = time.perf_counter() - t0
    print(f"compiled {ok}/{len(feasible)} {what} in {dt:.1f} s ({dt / max(1, len(feasible)):.2f} s each)")
    return 0 if not failed else 1


Outcome = tuple[str, str | None]
"""(config label, compile error or None)."""


def _compile_here(fam: Any, configs: Sequence[Any], prob: Any) -> Iterator[Outcome]:
    from autocutlass.errors import KernelCompileError

    for cfg in configs:
        try:
            fam.compile(cfg, prob)
            yield str(cfg), None
        except KernelCompileError as e:
            yield str(cfg), str(e)


def _compile_pool(ns: argparse.Namespace, fam: Any, configs: Sequence[Any], prob: Any) -> Iterator[Outcome]:
    """Outcomes in the order they finish, from ``ns.workers`` spawned GPU-blind processes."""
    import concurrent.futures as cf
    import multiprocessing as mp

    jobs = [(ns.arch, ns.family, fam.config_to_dict(c), prob.as_dict()) for c in configs]
    with cf.ProcessPoolExecutor(ns.workers, mp_context=mp.get_context("spawn")) as pool:
        for fut in cf.as_completed([pool.submit(_compile_job, j) for j in jobs]):
            yield fut.result()


def _compile_job(job: tuple[str, str, dict[str, Any], dict[str, Any]]) -> Outcome:
    """Worker: compile one config (GPU-blind) into the kernel cache; (label, error or None)."""
    arch, family, cfg_dict, prob_dict = job
    os.environ["CUTE_DSL_ARCH"] = arch
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from autocutlass.errors import KernelCompileError
    from autocutlass.kernels import get_family
    from autocutlass.ops.registry import problem_from_dict

    fam = get_family(family)
    cfg = fam.config_from_dict(cfg_dict)
    try:
        fam.compile(cfg, problem_from_dict(prob_dict))
        return str(cfg), None
    except KernelCompileError as e:
        return str(cfg), str(e)
