"""``autocutlass.kernels.rules``: the helpers of the families' checks, and that each family's
domain rule names the field a config breaks (tile, swizzle, split-K, cluster)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from autocutlass.kernels.hopper_conv.check import check as conv_check
from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_gemm.check import check as gemm_check
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig
from autocutlass.kernels.rules import first_broken, outside, tile_domain
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.problem import GemmProblem


@dataclass
class Cfg:
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    swizzle: int = 1
    split_k: int = 1
    cluster_m: int = 1
    cluster_n: int = 1


T = ((64, 128), (128, 256), (64,))


def test_outside_names_the_first_field_out_of_range() -> None:
    assert outside((("a", 1, (1, 2)), ("b", 3, (1, 2)), ("c", 9, (1,)))) == "b=3 is not one of (1, 2)"
    assert outside((("a", 1, (1, 2)),)) is None
    assert outside((("a", 5, (1, 2)),), "for the simt kernel") == "a=5 is not one of (1, 2) for the simt kernel"


def test_tile_domain() -> None:
    assert tile_domain(Cfg(), T) is None
    assert tile_domain(Cfg(tile_n=96), T) == "tile_n=96 is not one of (128, 256)"
    assert tile_domain(Cfg(swizzle=3), T, swizzle=(1, 2)) == "swizzle=3 is not one of (1, 2)"
    assert tile_domain(Cfg(swizzle=3), T) is None  # not asked
    assert tile_domain(Cfg(split_k=5), T, split_k=(1, 2)) == "split_k=5 is not one of (1, 2)"
    assert tile_domain(Cfg(cluster_m=2), T, clusters=((1, 1),)) == "cluster 2x1 is not one of ((1, 1),)"
    # a tile out of range is named before the cluster
    assert tile_domain(Cfg(tile_m=32, cluster_m=2), T, clusters=((1, 1),)) == "tile_m=32 is not one of (64, 128)"


def test_first_broken_runs_rules_in_order() -> None:
    seen: list[str] = []

    def rule(name: str, why: str | None):  # noqa: ANN202
        def r(config: object, problem: object) -> str | None:
            seen.append(name)
            return why

        return r

    assert first_broken((rule("a", None), rule("b", "b broke"), rule("c", "c broke")), 0, 0) == "b broke"
    assert seen == ["a", "b"]
    assert first_broken((), 0, 0) is None


@pytest.mark.parametrize(("config", "why"), [
    (HopperGemmConfig(128, 100, 64), "tile_n=100 is not one of"),
    (HopperGemmConfig(128, 128, 64, cluster_m=3), "cluster 3x1 is not one of"),
])  # fmt: skip
def test_families_name_the_broken_field(config: HopperGemmConfig, why: str) -> None:
    got = gemm_check(config, GemmProblem(m=512, n=512, k=512))
    assert got is not None and why in got
    conv = HopperConvConfig(tile_m=128, tile_n=128, tile_k=64, cluster_m=config.cluster_m)
    problem = ConvProblem(ConvDirection.FPROP, n=2, h=16, w=16, c=64, k=64, r=3, s=3, pad_h=1, pad_w=1)
    got = conv_check(conv, problem)
    assert (got is not None and "cluster 3x1 is not one of" in got) == (config.cluster_m == 3)
