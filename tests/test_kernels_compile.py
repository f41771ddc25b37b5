"""GPU-free compile checks: sampled configs of every layout compile with CUTE_DSL_ARCH=sm_90a,
and a compiled kernel round-trips through the on-disk cache into a fresh process."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily, check
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, Major, GemmProblem

pytestmark = pytest.mark.compile


def _sample(n: int, seed: int) -> list[tuple[HopperGemmConfig, GemmProblem]]:
    fam = HopperGemmFamily()
    rng = random.Random(seed)
    out = []
    for am, bm in ((Major.ROW, Major.ROW), (Major.ROW, Major.COL), (Major.COL, Major.ROW), (Major.COL, Major.COL)):
        prob = GemmProblem(m=4096, n=4096, k=4096, a_major=am, b_major=bm)
        feasible = [c for c in fam.space(prob) if check(c, prob) is None]
        out += [(c, prob) for c in rng.sample(feasible, n)]
    return out


@pytest.fixture(scope="module", autouse=True)
def _arch() -> None:
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")


@pytest.mark.parametrize("cfg,prob", _sample(3, seed=2026), ids=lambda x: getattr(x, "short", lambda: "")())
def test_sampled_config_compiles(cfg: HopperGemmConfig, prob: GemmProblem) -> None:
    from autocutlass.kernels.hopper_gemm.compile import _compile
    from autocutlass.kernels.hopper_gemm.plan import make_plan

    assert _compile(make_plan(cfg, prob), 2) is not None


def test_epilogue_variants_and_batched_compile() -> None:
    from autocutlass.kernels.hopper_gemm.compile import _compile
    from autocutlass.kernels.hopper_gemm.plan import make_plan

    prob = GemmProblem(m=64, n=64, k=64, l=4, d_dtype=DType.FP32, c_dtype=DType.BF16,
                   epilogue=Epilogue(with_c=True, bias=True, activation=Activation.GELU_TANH))
    assert _compile(make_plan(HopperGemmConfig(64, 128, 64), prob), 3) is not None


@pytest.mark.parametrize(
    "cfg,prob",
    [
        # tf32 (K-major natively; the row-major-B class compiles as its K-major kernel problem)
        (HopperGemmConfig(128, 256, 32, cluster_m=2), GemmProblem(m=4096, n=4096, k=4096, a_dtype=DType.TF32,
                                                              b_dtype=DType.TF32, d_dtype=DType.FP32)),
        (HopperGemmConfig(128, 128, 64, schedule="pingpong"), GemmProblem(m=512, n=512, k=512, a_dtype=DType.TF32,
                                                                      b_dtype=DType.TF32, d_dtype=DType.FP32,
                                                                      b_major=Major.COL)),
        # workspace split-K, with an epilogue the GEMM leaves to the reduce kernel
        (HopperGemmConfig(64, 128, 128, split_k=4, split_mode="workspace"), GemmProblem(
            m=16, n=6144, k=4096, b_major=Major.COL, epilogue=Epilogue(bias=True, activation=Activation.SILU))),
        # swap_ab: column-major D through the stmatrix + TMA epilogue, with C, bias and split-K
        (HopperGemmConfig(64, 16, 128, split_k=11, swap_ab=True), GemmProblem(
            m=16, n=6144, k=4096, b_major=Major.COL, c_dtype=DType.BF16,
            epilogue=Epilogue(with_c=True, bias=True, activation=Activation.GELU))),
        # fp8 (e4m3): per-tensor scales, swapped decode kernel with a bias
        (HopperGemmConfig(128, 256, 128, cluster_m=2), GemmProblem(
            m=4096, n=4096, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=Major.COL)),
        (HopperGemmConfig(128, 16, 256, swap_ab=True, split_k=4), GemmProblem(
            m=16, n=6144, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=Major.COL,
            epilogue=Epilogue(bias=True))),
        # tf32 with A through registers: 'nn' swapped (column-major D, bias), and a column-major
        # A unswapped (ping-pong, A multicast over cluster_n)
        (HopperGemmConfig(128, 256, 32, cluster_m=2, swap_ab=True), GemmProblem(
            m=4096, n=4096, k=4096, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
            epilogue=Epilogue(bias=True))),
        (HopperGemmConfig(128, 128, 32, cluster_n=2, schedule="pingpong"), GemmProblem(
            m=512, n=512, k=512, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32, a_major=Major.COL,
            b_major=Major.COL)),
        # stream-K: a 2x2 cluster along N with C, bias and GELU; swapped decode with a direct store
        (HopperGemmConfig(128, 128, 64, cluster_m=2, cluster_n=2, raster="along_n", stream_k=True), GemmProblem(
            m=1536, n=1536, k=8192, l=2, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True,
                                                                              activation=Activation.GELU))),
        (HopperGemmConfig(128, 16, 128, swap_ab=True, store="direct", stream_k=True), GemmProblem(
            m=16, n=6144, k=4096, b_major=Major.COL)),
        # fitted widths (16-column epilogue chunks): 144 in B multicast with an epilogue, 176 split
        (HopperGemmConfig(128, 144, 64, cluster_n=2), GemmProblem(
            m=1536, n=1536, k=8192, b_major=Major.COL, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True))),
        (HopperGemmConfig(128, 176, 64, split_k=3, split_mode="workspace"), GemmProblem(m=512, n=704, k=16384,
                                                                                       b_major=Major.COL)),
        # swap_ab with workspace split-K (an M residue as tile_n 160; the reduce's transposed class)
        (HopperGemmConfig(128, 160, 64, cluster_n=2, split_k=13, split_mode="workspace", swap_ab=True),
         GemmProblem(m=320, n=640, k=40960, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True))),
        # interleaved splits (split s takes K blocks s, s + S, ...): workspace in a cluster, serial
        # with an epilogue
        (HopperGemmConfig(128, 64, 64, cluster_n=2, split_k=16, split_mode="workspace", interleave=True),
         GemmProblem(m=256, n=256, k=65536)),
        (HopperGemmConfig(128, 128, 64, split_k=5, interleave=True), GemmProblem(
            m=257, n=392, k=1000, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, activation=Activation.GELU))),
        # the wide cooperative tile (check.ACC_REGS_WIDE): in a cluster with bias and GELU; fp8 in
        # workspace-free serial split-K
        (HopperGemmConfig(256, 192, 64, cluster_n=2), GemmProblem(
            m=2000, n=3000, k=1000, epilogue=Epilogue(bias=True, activation=Activation.GELU))),
        (HopperGemmConfig(256, 192, 128, split_k=2), GemmProblem(
            m=700, n=900, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=Major.COL)),
        # 192-row tiles split along N (HopperGemmConfig.n_split): 'nn' in a cluster, 'nt' 160 wide
        # (80-column halves: 16-column epilogue chunks) with bias and GELU
        (HopperGemmConfig(192, 128, 64, cluster_n=2), GemmProblem(m=2000, n=3000, k=1000)),
        (HopperGemmConfig(192, 160, 64), GemmProblem(
            m=2049, n=6144, k=4096, b_major=Major.COL, epilogue=Epilogue(bias=True, activation=Activation.GELU))),
        # the swapped orientation data-parallel (swap_dp_candidate): the model's 128x160 pick on
        # 4608x1152 with a bias (along the kernel's rows); a wide tile swapped in a 2x1 cluster on
        # 'nn' (A' = B^T M-major); a 192-row N-split tile swapped
        (HopperGemmConfig(128, 160, 64, swap_ab=True), GemmProblem(
            m=4608, n=1152, k=4096, b_major=Major.COL, epilogue=Epilogue(bias=True, activation=Activation.SILU))),
        (HopperGemmConfig(256, 176, 64, cluster_m=2, swap_ab=True), GemmProblem(m=1300, n=4096, k=4096)),
        (HopperGemmConfig(192, 224, 64, swap_ab=True), GemmProblem(m=4608, n=1152, k=4096, b_major=Major.COL)),
    ],
    ids=["tf32-nn", "tf32-nt-pingpong", "splitk-workspace", "swap-ab-splitk-epilogue", "fp8", "fp8-swap-ab",
         "tf32-nn-swap-a-regs", "tf32-col-a-regs-pingpong", "stream-k-c2x2-epilogue", "stream-k-swap-direct",
         "fitted-144-c1x2-epilogue", "fitted-176-workspace", "swap-ab-workspace-c1x2-epilogue",
         "interleaved-workspace-c1x2", "interleaved-serial-epilogue", "wide-256x192-c1x2-epilogue",
         "wide-256x192-fp8-splitk", "nsplit-192x128-c1x2", "nsplit-192x160-epilogue", "swap-dp-128x160-bias",
         "swap-dp-wide-256x176-c2x1-nn", "swap-dp-nsplit-192x224"],
)
def test_tf32_workspace_split_k_and_swap_ab_compile(cfg: HopperGemmConfig, prob: GemmProblem) -> None:
    from autocutlass.kernels.hopper_gemm.check import kernel_problem
    from autocutlass.kernels.hopper_gemm.compile import _compile
    from autocutlass.kernels.hopper_gemm.plan import make_plan

    assert check(cfg, prob) is None
    plan = make_plan(cfg, kernel_problem(prob, cfg))
    assert plan.swap_ab is cfg.swap_ab
    # tf32 reads A through registers exactly when the kernel's A is M-major
    assert plan.a_regs is (prob.a_dtype is DType.TF32 and kernel_problem(prob, cfg).a_major is Major.COL)
    assert _compile(plan, 2) is not None
    assert plan.split_interleave is cfg.interleave


def test_interleave_axis_keys_check_and_space() -> None:
    """``interleave`` (split s takes K blocks s, s + S, ...): left out of the dict form when False,
    so the configs from before it keep their keys; only with split-K; in the space for every split
    config, and the model's cheapest split pick is seeded in both orders."""
    import dataclasses

    from autocutlass.kernels.hopper_gemm import HopperGemmFamily, model_picks
    from autocutlass.kernels.hopper_gemm.plan import make_plan

    ws = HopperGemmConfig(128, 64, 64, split_k=16, split_mode="workspace")
    il = dataclasses.replace(ws, interleave=True)
    assert "interleave" not in ws.as_dict() and il.as_dict()["interleave"] is True
    assert HopperGemmConfig.from_dict(il.as_dict()) == il and HopperGemmConfig.from_dict(ws.as_dict()) == ws
    assert il.short().endswith("sk16wi") and ws.short().endswith("sk16w")
    p = GemmProblem(m=256, n=256, k=65536)
    assert check(il, p) is None
    assert "split_k > 1" in (check(HopperGemmConfig(interleave=True), p) or "")
    assert make_plan(il, p).split_interleave and not make_plan(ws, p).split_interleave
    with pytest.raises(TypeError, match="interleave"):
        HopperGemmConfig(split_k=2, interleave=1)  # type: ignore[arg-type]
    space = HopperGemmFamily().space(p)
    splits = [c for c in space if c.split_k > 1 and not c.stream_k]
    assert all(dataclasses.replace(c, interleave=not c.interleave) in set(space) for c in splits[:500])
    assert not any(c.interleave for c in space if c.split_k == 1)
    picks = model_picks(p)
    assert picks[1] == dataclasses.replace(picks[0], interleave=True) and picks[1] in HopperGemmFamily().seeds(p)


def test_sampled_decode_configs_compile() -> None:
    """A sample of the decode space, swapped and not, narrow tiles included."""
    from autocutlass.kernels.hopper_gemm.check import kernel_problem
    from autocutlass.kernels.hopper_gemm.compile import _compile
    from autocutlass.kernels.hopper_gemm.plan import make_plan

    prob = GemmProblem(m=16, n=6144, k=4096, b_major=Major.COL)
    feasible = [c for c in HopperGemmFamily().space(prob) if check(c, prob) is None]
    rng = random.Random(11)
    sample = rng.sample([c for c in feasible if c.swap_ab], 2) + rng.sample([c for c in feasible if not c.swap_ab], 1)
    for cfg in sample:
        assert _compile(make_plan(cfg, kernel_problem(prob, cfg)), 2) is not None, cfg.short()


def test_disk_cache_serves_a_new_process(tmp_path: Path) -> None:
    from autocutlass.kernels.hopper_gemm.compile import STATS, get_compiled

    cfg, prob = HopperGemmConfig(128, 128, 64), GemmProblem(m=256, n=256, k=256, b_major=Major.COL)
    before = STATS.compiled
    get_compiled(cfg, prob, 2, tmp_path)
    assert STATS.compiled == before + 1
    assert len(list(tmp_path.glob("hopper_gemm-*.o"))) == 1
    code = (
        "import os; os.environ['CUTE_DSL_ARCH']='sm_90a';"
        "from pathlib import Path;"
        "from autocutlass.kernels.hopper_gemm.compile import STATS, get_compiled;"
        "from autocutlass.kernels.hopper_gemm import HopperGemmConfig;"
        "from autocutlass.ops.gemm.problem import GemmProblem, Major;"
        f"get_compiled(HopperGemmConfig(128,128,64), GemmProblem(m=999,n=64,k=32,b_major=Major.COL), 2, Path({str(tmp_path)!r}));"
        "print(STATS.compiled, STATS.disk_hits)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-2:] == ["0", "1"]


def test_compile_key_is_the_plan_the_kernel_is_built_from() -> None:
    """Two caller problems whose kernels are the same plan share one compiled object (tf32: a
    row-major B is copied to the column-major layout the other caller has); a config change
    that changes the plan (stream-K) changes the key."""
    from autocutlass.kernels.hopper_gemm.check import kernel_problem
    from autocutlass.kernels.hopper_gemm.compile import compile_key
    from autocutlass.kernels.hopper_gemm.plan import make_plan

    tf32 = dict(m=512, n=512, k=512, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32)
    cfg = HopperGemmConfig(128, 128, 32)
    copied, native = GemmProblem(**tf32, b_major=Major.ROW), GemmProblem(**tf32, b_major=Major.COL)
    assert copied.kernel_class_key() != native.kernel_class_key()

    def key(c: HopperGemmConfig, p: GemmProblem) -> str:
        return compile_key(make_plan(c, kernel_problem(p, c)), 2)

    assert key(cfg, copied) == key(cfg, native)
    assert key(HopperGemmConfig(128, 128, 32, stream_k=True), native) != key(cfg, native)
    assert key(cfg, native) != compile_key(make_plan(cfg, kernel_problem(native, cfg)), 3)


def test_corrupt_cache_entry_is_recompiled(tmp_path: Path) -> None:
    from autocutlass.kernels.hopper_gemm.compile import STATS, _memory, compile_key, get_compiled
    from autocutlass.kernels.hopper_gemm.plan import make_plan

    cfg, prob = HopperGemmConfig(64, 64, 64), GemmProblem(m=64, n=64, k=64)
    key = compile_key(make_plan(cfg, prob), 2)
    (tmp_path / f"hopper_gemm-{key}.o").write_bytes(b"not an object file")
    _memory.pop(key, None)
    before = STATS.compiled
    assert get_compiled(cfg, prob, 2, tmp_path) is not None
    assert STATS.compiled == before + 1
