"""GPU-free checks of the split-K reduce kernel: a few classes compile with CUTE_DSL_ARCH=sm_90a,
the compile key follows every class parameter, and the on-disk cache serves a fresh process and
survives a corrupt entry. Four compiles in all (about 2 s each)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autocutlass.ops.gemm.problem import Activation, DType

pytestmark = pytest.mark.compile

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
pytest.importorskip("cutlass")

# (splits, d_dtype, c_dtype, bias, activation, rank)
CLASSES = [
    (2, DType.BF16, None, False, Activation.NONE, 2),
    (5, DType.FP16, DType.FP32, True, Activation.GELU_TANH, 3),
    (5, DType.FP32, None, False, Activation.SILU, 2),
]
BASE = CLASSES[0]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reduce_cache")


def _reduce() -> Any:
    from autocutlass.kernels.hopper_gemm import reduce

    return reduce


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"S{c[0]}-{c[1].value}-c{c[2]}-b{int(c[3])}-{c[4].value}-r{c[5]}")
def test_class_compiles_and_is_cached(cls: tuple[Any, ...], cache_dir: Path) -> None:
    r = _reduce()
    before = r.STATS.compiled
    fn = r.get_reduce(*cls, cache_dir)
    assert fn is not None
    assert r.STATS.compiled == before + 1
    assert (cache_dir / f"splitk_reduce-{r.reduce_compile_key(*cls)}.o").is_file()
    hits = r.STATS.memory_hits
    assert r.get_reduce(*cls, cache_dir) is fn
    assert r.STATS.memory_hits == hits + 1


def test_compile_key_follows_every_parameter() -> None:
    r = _reduce()
    changes = [
        (3,) + BASE[1:],
        (BASE[0], DType.FP16) + BASE[2:],
        BASE[:2] + (DType.BF16,) + BASE[3:],
        BASE[:3] + (True,) + BASE[4:],
        BASE[:4] + (Activation.RELU, BASE[5]),
        BASE[:5] + (3,),
    ]
    keys = {r.reduce_compile_key(*c) for c in [BASE, *changes]}
    assert len(keys) == len(changes) + 1
    assert r.reduce_compile_key(*BASE) == r.reduce_compile_key(*BASE)


def test_transposed_class_compiles_under_its_own_key(cache_dir: Path) -> None:
    """``swap_ab``'s reduce (column-major D'): its own key, the row-major classes' keys unchanged
    (the class dict names ``transposed`` only when set), and the DSL-free look-up finds it."""
    from autocutlass.kernels.helper_kernels import reduce_key

    r = _reduce()
    cls = (3, DType.BF16, DType.BF16, True, Activation.SILU, 3)
    assert r.reduce_compile_key(*cls, transposed=True) != r.reduce_compile_key(*cls)
    assert r.reduce_compile_key(*cls) == reduce_key(*cls)
    assert r.reduce_compile_key(*cls, transposed=True) == reduce_key(*cls, transposed=True)
    assert "transposed" not in r.ReduceClass(*cls).as_dict() and r.ReduceClass(*cls, True).as_dict()["transposed"]
    assert r.get_reduce(*cls, cache_dir, transposed=True) is not None
    assert (cache_dir / f"splitk_reduce-{reduce_key(*cls, transposed=True)}.o").is_file()


def test_compile_key_follows_sources_and_dsl(monkeypatch: pytest.MonkeyPatch) -> None:
    r = _reduce()
    key = r.reduce_compile_key(*BASE)
    monkeypatch.setattr(r, "source_hash", lambda: "other-sources")
    assert r.reduce_compile_key(*BASE) != key
    monkeypatch.undo()
    monkeypatch.setattr(r, "dsl_version", lambda: "0.0.0")
    assert r.reduce_compile_key(*BASE) != key


@pytest.mark.parametrize(
    "cls",
    [
        (0,) + BASE[1:],
        (17,) + BASE[1:],
        (BASE[0], DType.E4M3) + BASE[2:],
        BASE[:2] + (DType.TF32,) + BASE[3:],
        BASE[:5] + (4,),
    ],
)
def test_unsupported_class_is_refused(cls: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        _reduce().get_reduce(*cls, None)


def test_disk_cache_serves_a_new_process(cache_dir: Path) -> None:
    r = _reduce()
    r.get_reduce(*BASE, cache_dir)  # compiled by the test above, or now
    code = (
        "import os; os.environ['CUTE_DSL_ARCH']='sm_90a';"
        "from pathlib import Path;"
        "from autocutlass.kernels.hopper_gemm.reduce import STATS, get_reduce;"
        "from autocutlass.ops.gemm.problem import Activation, DType;"
        f"get_reduce(2, DType.BF16, None, False, Activation.NONE, 2, Path({str(cache_dir)!r}));"
        "print(STATS.compiled, STATS.disk_hits)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-2:] == ["0", "1"]


def test_corrupt_cache_entry_is_recompiled(tmp_path: Path) -> None:
    r = _reduce()
    key = r.reduce_compile_key(*BASE)
    path = tmp_path / f"splitk_reduce-{key}.o"
    path.write_bytes(b"not an object file")
    r._memory.pop(key, None)
    before = r.STATS.compiled
    assert r.get_reduce(*BASE, tmp_path) is not None
    assert r.STATS.compiled == before + 1
    assert path.stat().st_size > 100


def test_package_import_stays_dsl_free() -> None:
    code = (
        "import sys, autocutlass.kernels.hopper_gemm, autocutlass.kernels.hopper_gemm.check,"
        " autocutlass.kernels.hopper_gemm.plan;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cutlass'"
        " or m.endswith(('epilogue_math', 'hopper_gemm.reduce'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
