"""The 32-bit transpose kernel on the GPU: random 32-bit patterns (NaNs with payloads, infinities,
denormals included) read from sources whose rows are slices of wider rows, written into
poisoned destinations with padded rows, compared bit for bit with ``src.transpose(-1, -2)``
for R, C in {1, 3, 64, 127, 4096} and L in {1, 3}; the padding past R must stay poisoned.
Also: calls that break the declared requirements are refused, one compile serves every shape,
``k_major_copy`` gives the torch copy's bits, tf32 GEMMs whose operands go through it match
the reference, and a timing of the 4096 x 4096 transpose against torch's copy is printed
(run with ``-s`` to see it; it asserts nothing)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from autocutlass.ops.gemm.problem import DType, Major, GemmProblem

pytestmark = pytest.mark.gpu

EXTENTS = (1, 3, 64, 127, 4096)
POISON = 0x7FBADBAD
"""A NaN bit pattern in every destination slot before the call."""
LAYOUTS = {"dense": (0, 0), "sliced": (8, 4)}
"""(extra elements at the end of each source row, elements skipped at the start of each row):
"sliced" sources have a row stride larger than C and a base 16 bytes into the buffer."""


def _src(l: int, r: int, c: int, layout: str, rank: int, seed: int) -> Any:
    """Random 32-bit patterns as an fp32 (R, C) / (L, R, C) view with a row stride of C rounded
    up to 4, plus the layout's padding, and a batch stride of R + 1 such rows."""
    import torch

    pad, off = LAYOUTS[layout]
    width = off + -(-c // 4) * 4 + pad
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bits = torch.randint(-(2**31), 2**31 - 1, (l, r + 1, width), generator=gen, dtype=torch.int32, device="cuda")
    src = bits.view(torch.float32)[:, :r, off : off + c]
    return src[0] if rank == 2 else src


def _dst(l: int, r: int, c: int, rank: int) -> tuple[Any, Any]:
    """A poisoned (L, C, R_pad) buffer, R_pad = R rounded up to 4 plus 4, and its (.., C, R) slice."""
    import torch

    r_pad = -(-r // 4) * 4 + 4
    buf = torch.full((l, c, r_pad), POISON, dtype=torch.int32, device="cuda").view(torch.float32)
    if rank == 2:
        buf = buf[0]
    return buf, buf[..., :r]


def _get(rank: int) -> Any:
    from autocutlass.kernels.transpose import get_transpose

    return get_transpose(rank, None)


def _check(src: Any, buf: Any, dst: Any, where: str) -> None:
    import torch

    r = src.shape[-2]
    assert torch.equal(dst.view(torch.int32), src.transpose(-1, -2).view(torch.int32)), f"{where}: wrong bits"
    assert bool((buf.view(torch.int32)[..., r:] == POISON).all()), f"{where}: write past R"


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("l,rank", [(1, 2), (1, 3), (3, 3)], ids=["L1-rank2", "L1-rank3", "L3-rank3"])
def test_transpose_is_bitwise_exact(l: int, rank: int, layout: str) -> None:
    import torch

    fn = _get(rank)
    for r, c in itertools.product(EXTENTS, EXTENTS):
        if l == 3 and r == c == 4096 and layout == "sliced":
            continue  # the same tiles as the dense case, at 400 MB
        src = _src(l, r, c, layout, rank, seed=r * 10007 + c)
        buf, dst = _dst(l, r, c, rank)
        fn(src, dst)
        torch.cuda.synchronize()
        _check(src, buf, dst, f"L={l} R={r} C={c} rank={rank} {layout}")


def test_one_compile_serves_every_shape_and_side_streams() -> None:
    import torch

    from autocutlass.kernels.transpose import STATS

    fn = _get(3)
    before = STATS.compiled
    stream = torch.cuda.Stream()
    for l, r, c in ((2, 5, 9), (1, 4096, 68), (4, 129, 1000)):
        src = _src(l, r, c, "sliced", 3, seed=l + r + c)
        buf, dst = _dst(l, r, c, 3)
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            _get(3)(src, dst)
        stream.synchronize()
        _check(src, buf, dst, f"L={l} R={r} C={c} on a side stream")
    assert STATS.compiled == before
    assert fn is _get(3)


def test_broken_requirements_are_refused() -> None:
    """Rows that are not 16-byte aligned, disagreeing shapes, a misaligned base and another
    dtype raise in the argument checks instead of launching."""
    import torch

    fn = _get(2)
    _, dst = _dst(1, 5, 7, 2)
    bad = [
        (torch.zeros(5, 7, device="cuda"), dst),  # source row stride 7
        (torch.zeros(5, 8, device="cuda")[:, :7], torch.zeros(7, 8, device="cuda")[:, :6]),  # R 5 vs 6
        (torch.zeros(5, 12, device="cuda")[:, 1:8], dst),  # base 4 bytes into the buffer
        (torch.zeros(5, 8, dtype=torch.float64, device="cuda")[:, :7], dst),
    ]
    for src, d in bad:
        with pytest.raises(Exception):  # noqa: B017 - the TVM-FFI check's exception type is not ours
            fn(src, d)


@pytest.mark.parametrize("l", [1, 2])
def test_k_major_copy_matches_torch(l: int) -> None:
    """The kernel path of ``k_major_copy`` gives the same bits and layout as the torch path."""
    import torch

    from autocutlass.kernels.hopper_gemm.runner import k_major_copy

    rank = 3 if l > 1 else 2
    gen = torch.Generator(device="cuda").manual_seed(l)
    a = torch.randn(l, 203, 264, generator=gen, device="cuda").transpose(-1, -2)  # (L, M, K), M contiguous
    b = torch.randn(l, 203, 392, generator=gen, device="cuda")  # (L, K, N), N contiguous
    if rank == 2:
        a, b = a[0], b[0]
    for x, rows_k in ((a, True), (b, False)):
        ours = k_major_copy(x, rows_contiguous_k=rows_k, transpose=_get(rank))
        ref = k_major_copy(x, rows_contiguous_k=rows_k)
        torch.cuda.synchronize()
        assert torch.equal(ours, ref) and torch.equal(ours, x)
        assert ours.stride() == ref.stride()


TF32_CASES = [
    # M = 257: A's (K, M) source rows are 1028 bytes (4-byte aligned), too unaligned for TMA and
    # for the kernel, so A goes through torch's copy, B through the kernel
    (GemmProblem(m=257, n=392, k=204, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
             a_major=Major.COL, b_major=Major.ROW, align_a=4), False, 1),
    # an aligned column-major A is read through registers; B through the kernel; batched (rank 3),
    # K not a multiple of 4
    (GemmProblem(m=264, n=392, k=203, l=2, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
             a_major=Major.COL, b_major=Major.ROW), False, 1),
    # swapped: A' = B^T is read through registers, B' = A^T (N-major) through the kernel (K-major
    # B's rows are K long: K = 204 keeps them 16-byte aligned, as TMA needs)
    (GemmProblem(m=264, n=392, k=204, l=2, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
             a_major=Major.COL, b_major=Major.COL), True, 1),
]


@pytest.mark.parametrize("prob,swap,kernel_copies", TF32_CASES,
                         ids=[p.describe() + (" swap" if s else "") for p, s, _ in TF32_CASES])
def test_tf32_gemm_through_the_transpose(prob: GemmProblem, swap: bool, kernel_copies: int) -> None:
    from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily
    from autocutlass.kernels.hopper_gemm.runner import HopperGemmRunner
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    runner = HopperGemmFamily(cache_dir=None).compile(HopperGemmConfig(128, 128, 32, swap_ab=swap), prob)
    assert isinstance(runner, HopperGemmRunner)
    rank = 3 if prob.l > 1 else 2
    inner = runner._transpose[rank]
    calls: list[tuple[int, ...]] = []

    def counting(src: Any, dst: Any) -> None:
        calls.append(tuple(src.shape))
        inner(src, dst)

    runner._transpose[rank] = counting
    for seed in (0, 1):
        calls.clear()
        inputs = make_inputs(prob, device="cuda", seed=seed)
        ok, why = verify(runner, prob, inputs, reference(prob, inputs))
        assert ok, why
        # verify launches twice (alpha = 1, then its alpha check): kernel_copies per launch
        assert len(calls) == 2 * kernel_copies, calls


def test_print_bandwidth_4096() -> None:
    """Not an assertion: GB/s (bytes read + written) of the 4096 x 4096 fp32 transpose, ours
    against torch's ``copy_`` of a transposed view, L2 flushed before every call."""
    import torch

    from autocutlass.search.timing import time_callable

    n = 4096
    src = torch.randn(n, n, device="cuda")
    dst = torch.empty(n, n, device="cuda")
    fn = _get(2)
    flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
    ours = time_callable(lambda: fn(src, dst), flush_bytes=flush).median_ms
    theirs = time_callable(lambda: dst.copy_(src.t()), flush_bytes=flush).median_ms
    copy = time_callable(lambda: dst.copy_(src), flush_bytes=flush).median_ms
    moved = 2 * n * n * 4
    print(
        f"\ntranspose {n}x{n} fp32 on {torch.cuda.get_device_name()}: ours {ours * 1e3:.1f} us "
        f"({moved / ours / 1e6:.0f} GB/s); torch copy_ of the transpose {theirs * 1e3:.1f} us "
        f"({moved / theirs / 1e6:.0f} GB/s); plain copy_ {copy * 1e3:.1f} us ({moved / copy / 1e6:.0f} GB/s)"
    )
    torch.cuda.synchronize()
    assert torch.equal(dst, src)  # the last timed call was the plain copy
