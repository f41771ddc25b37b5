"""GPU-free checks of the 32-bit transpose kernel (``autocutlass.kernels.transpose``): ranks 2 and
3 compile with CUTE_DSL_ARCH=sm_90a into 16-byte global and shared accesses around one barrier,
the compile key follows the rank, sources and DSL version, the on-disk cache serves a fresh
process and survives a corrupt entry, importing the GEMM package stays DSL-free, and
``k_major_copy`` picks the kernel or torch's copy by the source's strides (on CPU tensors, with a
torch stand-in for the kernel). Four compiles in all, about 10 s."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("transpose_cache")


def _transpose() -> Any:
    pytest.importorskip("cutlass")
    from autocutlass.kernels import transpose

    return transpose


@pytest.mark.compile
@pytest.mark.parametrize("rank", [2, 3])
def test_rank_compiles_and_is_cached(rank: int, cache_dir: Path) -> None:
    t = _transpose()
    before = t.STATS.compiled
    fn = t.get_transpose(rank, cache_dir)
    assert fn is not None
    assert t.STATS.compiled == before + 1
    assert (cache_dir / f"transpose32-{t.transpose_compile_key(rank)}.o").is_file()
    hits = t.STATS.memory_hits
    assert t.get_transpose(rank, cache_dir) is fn
    assert t.STATS.memory_hits == hits + 1


@pytest.mark.compile
def test_generated_code_is_vectorised(tmp_path: Path) -> None:
    """Interior tiles: four 16-byte loads and stores per thread on each side of the shared
    memory and one barrier; the element-wise tail accesses exist too (edge tiles)."""
    ptx = _transpose()._compile(3, ptx_dir=tmp_path).__ptx__
    count = Counter(re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)\s", ptx, re.MULTILINE))  # opcodes
    assert count["ld.shared.v4.b32"] == 4 and count["st.shared.v4.b32"] == 4, count
    assert count["ld.global.v4.b32"] >= 4 and count["st.global.v4.b32"] >= 4, count
    assert count["ld.global.b32"] > 0 and count["st.global.b32"] > 0, count
    assert count["bar.sync"] == 1, count
    assert ".local" not in ptx  # the 4x4 register blocks stay in registers


def test_compile_key_follows_rank_own_source_and_dsl(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _transpose()
    key = t.transpose_compile_key(2)
    assert t.transpose_compile_key(2) == key
    assert t.transpose_compile_key(3) != key
    monkeypatch.setattr(t, "dsl_version", lambda: "0.0.0")
    assert t.transpose_compile_key(2) != key
    monkeypatch.undo()
    monkeypatch.setattr(t, "own_source_hash", lambda: "edited-kernel")
    assert t.transpose_compile_key(2) != key
    monkeypatch.undo()
    monkeypatch.setattr(t, "TILE", 32)
    assert t.transpose_compile_key(2) != key


@pytest.mark.parametrize("rank", [1, 4])
def test_unsupported_rank_is_refused(rank: int) -> None:
    t = _transpose()
    with pytest.raises(ValueError):
        t.get_transpose(rank, None)


@pytest.mark.compile
def test_disk_cache_serves_a_new_process(cache_dir: Path) -> None:
    _transpose().get_transpose(2, cache_dir)  # compiled by the test above, or now
    code = (
        "import os; os.environ['CUTE_DSL_ARCH']='sm_90a';"
        "from pathlib import Path;"
        "from autocutlass.kernels.transpose import STATS, get_transpose;"
        f"get_transpose(2, Path({str(cache_dir)!r}));"
        "print(STATS.compiled, STATS.disk_hits)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-2:] == ["0", "1"]


@pytest.mark.compile
def test_corrupt_cache_entry_is_recompiled(tmp_path: Path) -> None:
    t = _transpose()
    key = t.transpose_compile_key(2)
    path = tmp_path / f"transpose32-{key}.o"
    path.write_bytes(b"not an object file")
    t._memory.pop(key, None)
    before = t.STATS.compiled
    assert t.get_transpose(2, tmp_path) is not None
    assert t.STATS.compiled == before + 1
    assert path.stat().st_size > 100


def test_package_import_stays_dsl_free() -> None:
    """Neither the GEMM package, its check and plan, nor the runner module load the DSL or the
    transpose module when imported (the runner fetches the transpose in ``prepare``)."""
    code = (
        "import sys, autocutlass.kernels.hopper_gemm, autocutlass.kernels.hopper_gemm.check,"
        " autocutlass.kernels.hopper_gemm.plan, autocutlass.kernels.hopper_gemm.runner;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cutlass'"
        " or m.endswith(('.transpose', 'hopper_gemm.reduce'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_runner_constants_match_the_kernel() -> None:
    from autocutlass.kernels.hopper_gemm import runner

    assert runner.TRANSPOSE_TILE == _transpose().TILE


# ------------------------------------------------ k_major_copy's choice of path (CPU tensors)
class _Recorder:
    """Stands in for the compiled transpose on CPU tensors: checks the arguments the kernel's
    signature declares, then does ``dst[.., c, r] = src[.., r, c]`` with torch."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, src: Any, dst: Any) -> None:
        assert src.dim() == dst.dim() and src.dim() in (2, 3)
        assert tuple(dst.shape) == (*src.shape[:-2], src.shape[-1], src.shape[-2])
        for t in (src, dst):
            assert t.stride(-1) == 1 and all(s % 4 == 0 for s in t.stride()[:-1]) and t.data_ptr() % 16 == 0
        dst.copy_(src.transpose(-1, -2))
        self.calls += 1


def _col_major_a(l: int, m: int, k: int) -> Any:
    import torch

    a = torch.randn(l, k, m).transpose(-1, -2)
    return a[0] if l == 1 else a


def _row_major_b(l: int, k: int, n: int, row_pad: int = 0) -> Any:
    import torch

    b = torch.randn(l, k, n + row_pad)[..., :n]
    return b[0] if l == 1 else b


@pytest.mark.parametrize(
    "operand,l,rows,cols,uses_kernel",
    [
        ("a", 1, 264, 204, True),   # A (M, K), M % 4 == 0: the (K, M) source has 16-byte rows
        ("a", 2, 264, 203, True),
        ("a", 1, 257, 204, False),  # M = 257: 1028-byte source rows, torch's copy
        ("b", 1, 204, 392, True),   # B (K, N), N % 4 == 0
        ("b", 3, 203, 392, True),
        ("b", 1, 204, 390, False),  # N = 390: 1560-byte rows, torch's copy
    ],
)
def test_k_major_copy_path_and_result(operand: str, l: int, rows: int, cols: int, uses_kernel: bool) -> None:
    import torch

    from autocutlass.kernels.hopper_gemm.runner import k_major_copy

    rec = _Recorder()
    x = _col_major_a(l, rows, cols) if operand == "a" else _row_major_b(l, rows, cols)
    out = k_major_copy(x, rows_contiguous_k=operand == "a", transpose=rec)
    assert rec.calls == int(uses_kernel)
    assert torch.equal(out, x)
    k = x.shape[-1] if operand == "a" else x.shape[-2]
    k_stride = out.stride(-1) if operand == "a" else out.stride(-2)
    other = out.stride(-2) if operand == "a" else out.stride(-1)
    assert k_stride == 1 and other == -(-k // 4) * 4  # K-major, K padded to 16 bytes in the buffer


def test_k_major_copy_without_kernel_and_with_padded_rows() -> None:
    """No compiled function: torch's copy. A source that is a slice of wider (16-byte) rows goes
    through the kernel; an empty one through neither."""
    import torch

    from autocutlass.kernels.hopper_gemm.runner import k_major_copy, transpose_accepts

    b = _row_major_b(2, 100, 36, row_pad=8)
    assert torch.equal(k_major_copy(b, rows_contiguous_k=False), b)
    rec = _Recorder()
    assert torch.equal(k_major_copy(b, rows_contiguous_k=False, transpose=rec), b)
    assert rec.calls == 1
    assert k_major_copy(_row_major_b(1, 0, 8), rows_contiguous_k=False, transpose=rec).shape == (0, 8)
    assert rec.calls == 1
    assert not transpose_accepts(torch.randn(8, 8, dtype=torch.float64))
    assert not transpose_accepts(torch.randn(8, 12)[:, 1:9])  # base not 16-byte aligned
    assert not transpose_accepts(torch.randn(8, 8).t())  # not C-contiguous
