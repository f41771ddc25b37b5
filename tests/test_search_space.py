"""SearchSpace and strategies: Optuna axes, feasibility with reasons, grid vs TPE, no repeats."""

from __future__ import annotations

import optuna
import pytest
from _search_fakes import FakeConfig, FakeFamily

from autocutlass.db.records import config_key as db_config_key
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.space import NOT_IN_SPACE, SearchSpace, config_key
from autocutlass.search.strategy import GridStrategy, TpeStrategy, make_strategy

P = GemmProblem(m=256, n=256, k=256)


def test_config_key_matches_the_database() -> None:
    for cfg in ({"tile": 32, "stages": 2, "mode": "a"}, {"b": 1, "a": "x", "c": [1, 2]}):
        assert config_key(cfg) == db_config_key(cfg)


def test_axes_are_sorted_value_sets_as_categorical_distributions() -> None:
    fam = FakeFamily(tiles=(64, 16, 32), stages=(3, 1), modes=("b", "a"), seeds=[])
    space = SearchSpace(fam, P)
    assert space.axes == {"mode": ("a", "b"), "stages": (1, 3), "tile": (16, 32, 64)}
    for name, dist in space.distributions.items():
        assert isinstance(dist, optuna.distributions.CategoricalDistribution)
        assert dist.choices == space.axes[name]
    assert len(space) == 12


def test_feasibility_with_reasons() -> None:
    fam = FakeFamily(smem=100)
    space = SearchSpace(fam, P)
    infeasible = [c for c in space.candidates if c.config.tile * c.config.stages > 100]
    assert infeasible and len(space.feasible) == len(space) - len(infeasible)
    cand, reason = space.resolve({"tile": 128, "stages": 3, "mode": "a"})
    assert cand is None and reason is not None and "exceeds smem 100" in reason
    cand, reason = space.resolve({"tile": 16, "stages": 1, "mode": "a"})
    assert cand is not None and reason is None and cand.config == FakeConfig(16, 1, "a")
    assert sum(space.reason_counts().values()) == len(infeasible)


def test_combination_outside_the_space_is_rejected() -> None:
    class Sparse(FakeFamily):
        def space(self, problem):  # type: ignore[no-untyped-def]
            return [FakeConfig(16, 1, "a"), FakeConfig(32, 2, "b")]

    space = SearchSpace(Sparse(seeds=[]), P)
    cand, reason = space.resolve({"tile": 16, "stages": 2, "mode": "a"})
    assert cand is None and reason == NOT_IN_SPACE


def test_grid_for_small_space_and_exhaustive_tpe_for_large() -> None:
    small = SearchSpace(FakeFamily(), P)
    assert isinstance(make_strategy(small, [], skip=set(), budget_trials=None, exhaustive=False, grid_max=64), GridStrategy)
    big = SearchSpace(FakeFamily(tiles=tuple(range(8, 8 * 41, 8)), stages=(1, 2, 3, 4), smem=10_000), P)
    assert len(big.feasible) > 64
    assert isinstance(make_strategy(big, [], skip=set(), budget_trials=16, exhaustive=False, grid_max=64), TpeStrategy)
    assert isinstance(make_strategy(big, [], skip=set(), budget_trials=16, exhaustive=True, grid_max=64), GridStrategy)
    # a trial budget that covers the whole remaining space means grid
    assert isinstance(
        make_strategy(big, [], skip=set(), budget_trials=10_000, exhaustive=False, grid_max=64), GridStrategy
    )


def test_grid_puts_seeds_first_and_skips_finished() -> None:
    fam = FakeFamily(seeds=[FakeConfig(64, 3, "b"), FakeConfig(16, 1, "a")], smem=1000)
    space = SearchSpace(fam, P)
    skip = {config_key({"tile": 16, "stages": 1, "mode": "a"}), config_key({"tile": 32, "stages": 1, "mode": "a"})}
    grid = GridStrategy(space, fam.seeds(P), skip=skip)
    seen = []
    while (c := grid.propose()) is not None:
        seen.append(c)
    assert seen[0].config == FakeConfig(64, 3, "b")
    assert len(seen) == len(space.feasible) - 2
    assert not {c.key for c in seen} & skip


def test_tpe_proposes_only_feasible_new_candidates_until_exhausted() -> None:
    fam = FakeFamily(tiles=(16, 32, 64, 128, 256), stages=(1, 2, 3, 4), smem=192)
    space = SearchSpace(fam, P)
    skip = {space.feasible[0].key}
    tpe = TpeStrategy(space, fam.seeds(P), skip=skip, seed=1)
    keys = []
    for i in range(10_000):
        cand = tpe.propose()
        if cand is None:
            break
        assert space.rejection(cand.key) is None
        keys.append(cand.key)
        tpe.observe(cand, float(cand.config.tile) if i % 3 else None)
    assert len(keys) == len(set(keys)) == len(space.feasible) - 1
    assert skip.isdisjoint(keys)
    assert keys[0] == config_key({"tile": 32, "stages": 2, "mode": "a"})  # the seed comes first
    assert sum(tpe.rejections.values()) > 0  # infeasible samples were seen and rejected, with reasons
    assert all("exceeds smem" in r for r in tpe.rejections)


def test_tpe_learns_from_prior_results() -> None:
    fam = FakeFamily(tiles=(16, 32, 64, 128), stages=(1, 2, 3), smem=1000)
    space = SearchSpace(fam, P)
    tpe = TpeStrategy(space, [], skip=set(), seed=0)
    for cand in space.feasible[:5]:
        tpe.add_prior(cand, float(cand.config.tile))
    proposed = {c.key for c in iter(tpe.propose, None)}
    assert proposed == {c.key for c in space.feasible[5:]}


@pytest.mark.parametrize("exhaustive", [False, True])
def test_strategy_with_everything_finished_proposes_nothing(exhaustive: bool) -> None:
    fam = FakeFamily()
    space = SearchSpace(fam, P)
    skip = {c.key for c in space.feasible}
    s = make_strategy(space, fam.seeds(P), skip=skip, budget_trials=None, exhaustive=exhaustive, grid_max=64)
    assert s.propose() is None


def test_fields_a_config_dict_leaves_out_are_an_axis_value() -> None:
    """hopper_conv leaves split_mode out of a serial config's dict (so older records keep their
    keys): Optuna sees the field as an axis with ABSENT among its values. The seeds come first as
    they are (an unsplit seed stays unsplit: with the field sampled, every combination named
    split_mode and only workspace configs could be drawn), and TPE draws serial and workspace
    splits alike; each candidate resolves back to itself."""
    from autocutlass.kernels.hopper_conv import HopperConvFamily
    from autocutlass.kernels.hopper_conv.config import HopperConvConfig, SplitMode
    from autocutlass.ops.conv.problem import ConvProblem
    from autocutlass.search.space import ABSENT
    from autocutlass.search.tuner import differs_in_one_field

    fam = HopperConvFamily()
    prob = ConvProblem("fprop", n=32, h=7, w=7, c=512, k=512, r=3, s=3, pad_h=1, pad_w=1)
    space = SearchSpace(fam, prob)
    assert set(space.axes["split_mode"]) == {ABSENT, "workspace"}
    for cand in space.feasible[::37]:
        assert space.resolve(space.axis_params(cand)) == (cand, None)
    seeds = fam.seeds(prob)
    tpe = TpeStrategy(space, seeds, skip=set(), seed=0)
    drawn = []
    for _ in range(60):
        cand = tpe.propose()
        assert cand is not None
        drawn.append(cand.config)
        tpe.observe(cand, 1.0)
    feasible_seeds = [c for c in seeds if space.candidate_of(c) and space.rejection(space.candidate_of(c).key) is None]
    assert drawn[: len(feasible_seeds)] == feasible_seeds
    assert any(c.split_mode is SplitMode.SERIAL and c.split_k == 1 for c in drawn[len(feasible_seeds):])
    assert any(c.split_mode is SplitMode.WORKSPACE for c in drawn)
    serial = HopperConvConfig(128, 256, 64, split_k=5)
    assert differs_in_one_field(fam.config_to_dict(serial),
                                fam.config_to_dict(HopperConvConfig(128, 256, 64, split_k=5, split_mode="workspace")))
    assert not differs_in_one_field(fam.config_to_dict(serial),
                                    fam.config_to_dict(HopperConvConfig(128, 128, 64, split_k=5, split_mode="workspace")))


def test_search_does_not_import_db() -> None:
    import ast
    from pathlib import Path

    import autocutlass.search

    for path in Path(autocutlass.search.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n == "autocutlass.db" or n.startswith("autocutlass.db.") for n in names), path
