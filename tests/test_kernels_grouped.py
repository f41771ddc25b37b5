"""The hopper_grouped family without a GPU: problem and config reasons, seeds and space, the plan
(group tables beside the ring), the registry's gate, the source hash, and sampled configs of both
weight majors compiled with CUTE_DSL_ARCH=sm_90a (marker ``compile``), one through the on-disk
cache."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from autocutlass import kernels
from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.config import Raster, Schedule, Store
from autocutlass.kernels.hopper_grouped import (
    HopperGroupedConfig,
    HopperGroupedFamily,
    check,
)
from autocutlass.kernels.hopper_grouped.plan import (
    MAX_EXPERTS,
    TABLE_ENTRIES,
    equivalent_gemm,
    make_plan,
    table_bytes,
    table_entries,
)
from autocutlass.kernels.hopper_grouped.sources import SOURCE_FILES
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.types import Activation, DType, Epilogue, Major

C = HopperGroupedConfig
SUITE = Path(__file__).resolve().parent.parent / "benchmarks" / "shapes-grouped.json"


def suite_problems() -> list[GroupedGemmProblem]:
    cases = json.loads(SUITE.read_text())["cases"]
    return [GroupedGemmProblem(experts=c["E"], t=c["T"], n=c["N"], k=c["K"], w_major=Major.COL) for c in cases]


@pytest.mark.parametrize(
    "problem, needle",
    [
        (GroupedGemmProblem(experts=8, t=64, n=64, k=64, x_dtype=DType.TF32, w_dtype=DType.TF32,
                            out_dtype=DType.FP32), "x dtype tf32"),
        (GroupedGemmProblem(experts=8, t=64, n=64, k=64, w_dtype=DType.FP16), "differ"),
        (GroupedGemmProblem(experts=8, t=64, n=64, k=64, align_w=8), "w is only 8-byte aligned"),
        (GroupedGemmProblem(experts=8, t=64, n=60, k=64, align_out=8), "N=60"),
        (GroupedGemmProblem(experts=MAX_EXPERTS + 1, t=64, n=64, k=64), "experts exceed"),
    ],
)  # fmt: skip
def test_problem_reasons(problem: GroupedGemmProblem, needle: str) -> None:
    fam = HopperGroupedFamily()
    assert needle in (fam.supports(problem) or ""), fam.supports(problem)
    assert needle in (check(C(), problem) or "")
    assert fam.seeds(problem) == []


def test_other_ops_are_not_served() -> None:
    from autocutlass.ops.gemm.problem import GemmProblem

    assert "not grouped_mm" in (HopperGroupedFamily().supports(GemmProblem(m=64, n=64, k=64)) or "")


@pytest.mark.parametrize(
    "config, needle",
    [(C(tile_m=256), "tile_m=256"), (C(tile_n=208), "tile_n=208"), (C(tile_k=32), "tile_k=32"),
     (C(tile_n=96, tile_k=64), None), (C(128, 256, schedule=Schedule.PINGPONG), "256 fp32 accumulator registers"),
     (C(64, 256, schedule=Schedule.PINGPONG), None), (C(cluster_m=3), "cluster 3x1"), (C(cluster_m=2), None),
     (C(cluster_m=2, cluster_n=2), "cluster 2x2"), (C(cluster_n=2), None), (C(64, cluster_n=2), None),
     # an N-contiguous weight tile multicast in halves: each half whole 64-column swizzle atoms
     (C(tile_n=96, cluster_m=2), "B multicast over cluster_m=2"), (C(tile_n=256, cluster_m=2), None)],
)  # fmt: skip
def test_config_reasons(config: HopperGroupedConfig, needle: str | None) -> None:
    reason = check(config, GroupedGemmProblem(experts=8, t=256, n=512, k=512))
    assert (reason is None) if needle is None else needle in (reason or ""), reason


def test_n_contiguous_weights_need_tiles_of_whole_swizzle_atoms() -> None:
    """The GEMM family's rule on the equivalent GEMM: an N-contiguous B tile of 16-column atoms."""
    row = GroupedGemmProblem(experts=8, t=256, n=512, k=512, w_major=Major.ROW)
    assert check(C(tile_n=96), row) is None and check(C(tile_n=160), row) is None


@pytest.mark.parametrize("problem", suite_problems()[::3], ids=lambda p: p.describe())
def test_suite_problems_are_served_with_feasible_seeds(problem: GroupedGemmProblem) -> None:
    fam = HopperGroupedFamily()
    assert fam.supports(problem) is None
    seeds = fam.seeds(problem)
    assert len(seeds) >= 4 and all(check(s, problem) is None for s in seeds)
    space = fam.space(problem)
    rows = problem.t / problem.experts
    # TMA stores only where the experts average a whole tile of rows
    assert {(c.tile_m, c.store) for c in space} == {(tm, st) for tm in (64, 128) for st in Store
                                                     if st is Store.DIRECT or rows >= tm}
    space = [c for c in space if c.store is Store.DIRECT]
    alone = [c for c in space if (c.cluster_m, c.cluster_n) == (1, 1)]
    assert len(alone) == 112 and sum(check(c, problem) is None for c in alone) == 96
    # pairs along M only where the experts average more than two row tiles, along N where N
    # spans more than one column tile

    def tiles(cm: int, cn: int) -> set[tuple[object, ...]]:
        return {(c.tile_m, c.tile_n, c.tile_k, c.raster, c.schedule) for c in space if (c.cluster_m, c.cluster_n) == (cm, cn)}

    assert tiles(2, 1) == {(c.tile_m, c.tile_n, c.tile_k, c.raster, c.schedule) for c in alone if rows > 2 * c.tile_m}
    assert tiles(1, 2) == {(c.tile_m, c.tile_n, c.tile_k, c.raster, c.schedule) for c in alone if problem.n > c.tile_n}
    assert len(space) == len(alone) + len(tiles(2, 1)) + len(tiles(1, 2))
    for c in space:  # the pairs of K-major weights and row-major tokens split into whole swizzle atoms
        if c.cluster_m * c.cluster_n > 1 and check(dataclasses.replace(c, cluster_m=1, cluster_n=1), problem) is None:
            assert check(c, problem) is None, c.short()
    if rows > 512:  # large experts: a pair sharing an operand tile, storing by TMA, leads
        assert seeds[0].cluster_m * seeds[0].cluster_n == 2 and seeds[0].store is Store.TMA
    if problem.t / problem.experts <= 64:
        assert seeds[0].tile_m == 64  # small experts: the fewest wasted rows
    else:
        assert seeds[0].tile_m == 128


def test_table_tiers_and_the_stages_they_leave() -> None:
    assert [table_entries(e) for e in (1, 8, 63, 64, 128, 255, 256, 1023)] == [64, 64, 64, 256, 256, 256, 1024, 1024]
    with pytest.raises(ValueError, match="exceed"):
        table_entries(1024)
    assert table_bytes(64) == 1024 and table_bytes(1024) == 3 * 4096
    big = GroupedGemmProblem(experts=8, t=4096, n=14336, k=4096, w_major=Major.COL)
    p = make_plan(C(128, 256, 64), big)
    assert p.entries == 64 and p.gemm.stages == 4 and p.gemm.direct_store and not p.gemm.pingpong
    assert p.gemm.smem_bytes + table_bytes(64) <= budgets.SM90_SMEM_PER_BLOCK_OPTIN
    many = make_plan(C(128, 128, 64), GroupedGemmProblem(experts=256, t=4096, n=4096, k=7168))
    assert many.entries == 1024 and many.gemm.smem_bytes + table_bytes(1024) <= budgets.SM90_SMEM_PER_BLOCK_OPTIN
    assert many.gemm.b_major is Major.ROW and many.gemm.num_consumer_wgs == 2


def test_equivalent_gemm_carries_the_class() -> None:
    p = GroupedGemmProblem(experts=8, t=0, n=512, k=256, x_dtype=DType.FP16, w_dtype=DType.FP16,
                           out_dtype=DType.FP32, w_major=Major.COL, epilogue=Epilogue(bias=True, activation="silu"))  # fmt: skip
    g = equivalent_gemm(p)
    assert (g.m, g.n, g.k, g.a_major, g.b_major, g.d_dtype) == (1, 512, 256, Major.ROW, Major.COL, DType.FP32)
    assert g.epilogue == p.epilogue


def test_config_round_trip_and_labels() -> None:
    cfg = C(64, 192, 128, Raster.ALONG_N)
    assert C.from_dict(cfg.as_dict()) == cfg and C.from_dict(json.loads(json.dumps(cfg.as_dict()))) == cfg
    assert cfg.short() == "64x192x128 n" and cfg.consumers == 1 and C(128).consumers == 2
    pp = C(64, 256, 64, schedule="pingpong")
    assert pp.schedule is Schedule.PINGPONG and pp.consumers == 2 and pp.short() == "64x256x64 m pp"
    assert C.from_dict(json.loads(json.dumps(pp.as_dict()))) == pp and C.from_dict({"tile_m": 64}) == C(64)
    pair = C(128, 256, 64, cluster_m=2)
    assert pair.short() == "128x256x64 m c2x1" and C.from_dict(json.loads(json.dumps(pair.as_dict()))) == pair
    older = {k: v for k, v in pair.as_dict().items() if not k.startswith("cluster")}
    assert C.from_dict(older) == C(128, 256, 64)  # records stored before clusters: 1x1
    assert make_plan(pair, GroupedGemmProblem(experts=8, t=4096, n=512, k=512)).gemm.cluster_m == 2
    across = C(128, 256, 64, schedule="pingpong", cluster_n=2)
    assert across.short() == "128x256x64 m pp c1x2" and C.from_dict(json.loads(json.dumps(across.as_dict()))) == across
    plan = make_plan(C(128, 256, 64, cluster_n=2), GroupedGemmProblem(experts=8, t=4096, n=512, k=512)).gemm
    assert (plan.cluster_m, plan.cluster_n) == (1, 2) and plan.direct_store
    staged = C(128, 256, 64, cluster_n=2, store="tma")
    assert staged.short() == "128x256x64 m c1x2 tma" and C.from_dict(json.loads(json.dumps(staged.as_dict()))) == staged
    assert make_plan(staged, GroupedGemmProblem(experts=8, t=4096, n=512, k=512)).gemm.smem_epilogue
    assert make_plan(pp, GroupedGemmProblem(experts=8, t=64, n=512, k=512)).gemm.pingpong
    with pytest.raises(TypeError):
        C(tile_m="64")  # type: ignore[arg-type]


def test_the_registry_gates_the_family(monkeypatch: pytest.MonkeyPatch) -> None:
    p = GroupedGemmProblem(experts=8, t=256, n=512, k=512)
    monkeypatch.setenv("AUTOCUTLASS_GROUPED_KERNELS", "0")
    assert kernels.families_for(p) == []
    assert "AUTOCUTLASS_GROUPED_KERNELS=0" in kernels.unsupported_reason(p)
    monkeypatch.delenv("AUTOCUTLASS_GROUPED_KERNELS")  # on by default
    assert [f.name for f in kernels.families_for(p)] == ["hopper_grouped"]
    assert kernels.families_for(p)[0].TUNED_ONLY  # and serves only problems tuned on this GPU
    assert "hopper_grouped" in kernels.source_hashes()


def test_source_files_exist_and_the_other_families_keep_their_hashes() -> None:
    root = Path(kernels.__file__).parent
    assert all((root / f).is_file() for f in SOURCE_FILES)
    assert "hopper_grouped/kernel.py" in SOURCE_FILES and "hopper_grouped/check.py" not in SOURCE_FILES
    from autocutlass.kernels.hopper_gemm import sources as gemm_sources

    assert not any(f.startswith("hopper_grouped") for f in gemm_sources.SOURCE_FILES)


def test_importing_the_family_does_not_load_the_dsl() -> None:
    code = ("import sys; import autocutlass.kernels.hopper_grouped as f; f.HopperGroupedFamily().seeds("
            "__import__('autocutlass.ops.grouped.problem', fromlist=['x']).GroupedGemmProblem(experts=8, t=64, n=64,"
            " k=64)); print('cutlass' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- compile (no GPU) ---------------------------------------------------------------------------
def _compile_cases() -> list[tuple[HopperGroupedConfig, GroupedGemmProblem]]:
    rng = random.Random(2026)
    fam = HopperGroupedFamily()
    cases = []
    for major, experts in ((Major.COL, 128), (Major.ROW, 8)):
        prob = GroupedGemmProblem(experts=experts, t=4096, n=1536, k=2048, w_major=major)
        feasible = [c for c in fam.space(prob) if check(c, prob) is None]
        cases += [(c, prob) for c in rng.sample(feasible, 3)]
    cases += [
        (C(64, 256, 64), GroupedGemmProblem(experts=256, t=256, n=4096, k=7168, w_major=Major.COL,
                                            epilogue=Epilogue(bias=True, activation=Activation.SILU))),
        (C(128, 128, 64, schedule=Schedule.PINGPONG), GroupedGemmProblem(experts=8, t=16384, n=14336, k=4096,
                                                                          w_major=Major.COL, epilogue=Epilogue(bias=True))),
        (C(128, 256, 64, cluster_m=2), GroupedGemmProblem(experts=8, t=16384, n=14336, k=4096, w_major=Major.COL)),
        (C(128, 256, 64, cluster_n=2, store=Store.TMA),
         GroupedGemmProblem(experts=8, t=16384, n=14336, k=4096, w_major=Major.COL)),
        (C(128, 128, 64, schedule=Schedule.PINGPONG, cluster_m=2, store=Store.TMA),
         GroupedGemmProblem(experts=8, t=4096, n=1536, k=2048, x_dtype=DType.FP16, w_dtype=DType.FP16,
                            out_dtype=DType.FP32, epilogue=Epilogue(bias=True, activation=Activation.GELU))),
        (C(64, 128, 64, Raster.ALONG_N, cluster_n=2),
         GroupedGemmProblem(experts=300, t=700, n=200, k=200, epilogue=Epilogue(bias=True, activation=Activation.GELU))),
        (C(128, 128, 64, schedule=Schedule.PINGPONG, cluster_m=2),
         GroupedGemmProblem(experts=8, t=4096, n=1536, k=2048, epilogue=Epilogue(bias=True, activation=Activation.SILU))),
        (C(128, 96, 128, Raster.ALONG_N), GroupedGemmProblem(experts=600, t=64, n=96, k=200, x_dtype=DType.FP16,
                                                             w_dtype=DType.FP16, out_dtype=DType.FP32,
                                                             epilogue=Epilogue(bias=True, activation=Activation.GELU))),
    ]  # fmt: skip
    return cases


@pytest.mark.compile
@pytest.mark.parametrize("cfg,prob", _compile_cases(), ids=lambda x: x.short() if hasattr(x, "short") else "")
def test_config_compiles(cfg: HopperGroupedConfig, prob: GroupedGemmProblem) -> None:
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from autocutlass.kernels.hopper_grouped.compile import _compile

    assert _compile(make_plan(cfg, prob)) is not None


@pytest.mark.compile
def test_every_table_tier_compiles_and_the_runner_loads_from_disk(tmp_path: Path) -> None:
    """The family's compile (runner) builds the tier of its problem; a fresh process loads the
    same kernel from the on-disk cache (no compile); the compile key follows the tier."""
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from autocutlass.kernels.hopper_grouped.compile import STATS, _compile, compile_key

    prob = GroupedGemmProblem(experts=40, t=512, n=256, k=256, w_major=Major.COL)
    cfg = C(64, 128, 64)
    keys = {compile_key(make_plan(cfg, prob, entries)) for entries in TABLE_ENTRIES}
    assert len(keys) == len(TABLE_ENTRIES)
    for entries in TABLE_ENTRIES[1:]:
        assert _compile(make_plan(cfg, prob, entries)) is not None
    before = STATS.compiled
    runner = HopperGroupedFamily(cache_dir=tmp_path).compile(cfg, prob)
    assert STATS.compiled == before + 1 and runner.prepare(40) is runner.prepare(63)
    assert len(list(tmp_path.glob("hopper_grouped-*.o"))) == 1
    code = (
        "import os; os.environ['CUTE_DSL_ARCH'] = 'sm_90a'\n"
        "from pathlib import Path\n"
        "from autocutlass.kernels.hopper_grouped import HopperGroupedConfig, HopperGroupedFamily\n"
        "from autocutlass.kernels.hopper_grouped.compile import STATS\n"
        "from autocutlass.ops.grouped.problem import GroupedGemmProblem\n"
        "from autocutlass.ops.types import Major\n"
        f"p = GroupedGemmProblem(experts=9, t=77, n=256, k=256, w_major=Major.COL)\n"
        f"HopperGroupedFamily(cache_dir=Path({str(tmp_path)!r})).compile(HopperGroupedConfig(64, 128, 64), p)\n"
        "print(STATS.compiled, STATS.disk_hits)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})  # fmt: skip
    assert out.stdout.split() == ["0", "1"], out.stdout + out.stderr


@pytest.mark.compile
def test_the_kernels_cli_compiles_a_grouped_class(capsys: pytest.CaptureFixture[str]) -> None:
    from autocutlass import cli

    rc = cli.main(["kernels", "compile", "--family", "hopper_grouped", "--shape", "256x4096x7168", "--experts", "256",
                   "--limit", "1", "--seed", "3"])  # fmt: skip
    assert rc == 0 and "compiled 1/1 hopper_grouped configs" in capsys.readouterr().out
    assert cli.main(["kernels", "list"]) == 0
    assert "hopper_grouped\n  bf16 nn: 336 configs in the tuning space, 304 feasible" in capsys.readouterr().out


def test_the_runner_hands_the_kernel_dense_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """An offs view with a stride (every other element of a buffer) reaches the compiled function
    as a dense (E,) vector with the same values; a dense one is passed as it is."""
    import torch

    from autocutlass.kernels.hopper_grouped import runner as rmod

    got: list[torch.Tensor] = []
    monkeypatch.setattr(rmod, "get_compiled", lambda *a: lambda x, w, offs, out, bias, clusters: got.append(offs))
    monkeypatch.setattr(rmod, "max_active_clusters", lambda dev, size: 1)
    prob = GroupedGemmProblem(experts=4, t=64, n=32, k=32, x_dtype=DType.BF16, w_dtype=DType.BF16,
                              out_dtype=DType.BF16, w_major=Major.COL)  # fmt: skip
    run = rmod.HopperGroupedRunner(HopperGroupedConfig(64, 64, 64), prob, None)
    x, w = torch.zeros(64, 32, dtype=torch.bfloat16), torch.zeros(4, 32, 32, dtype=torch.bfloat16)
    out = torch.empty(64, 32, dtype=torch.bfloat16)
    buf = torch.tensor([16, 0, 32, 0, 48, 0, 64, 0], dtype=torch.int32)
    run(x, w, buf[::2], out)
    assert got[-1].stride() == (1,) and got[-1].tolist() == [16, 32, 48, 64]
    dense = buf[::2].contiguous()
    run(x, w, dense, out)
    assert got[-1] is dense
