"""The cold-start path: a process that serves cached kernels imports neither the CuTe DSL nor Optuna.

CPU:
* The serve path in a child process where importing ``cutlass`` or ``optuna`` (or any of their
  submodules) raises: ``import autocutlass``, the shipped H200 database opened by dispatch, suite
  problems looked up under the H200 hard key, the stored configs' runners built from the kernel
  cache (files at the keys the records name; the shared-library loader stubbed) and launched on
  CPU tensors, the helper kernels (split-K reduce, transpose) fetched the same way. Adding a
  top-level ``import cutlass`` to the runner or the kernel cache fails it.
* The helper kernels' keys computed without the DSL equal those of the DSL modules; one prefix,
  one cache state; the DSL's choice of runtime library, restated.
* Real exported objects (a transpose and a GEMM, compiled here): linked and loaded through TVM-FFI
  in a child without the DSL, their argument checks answering (no GPU to launch on); a missing or
  damaged library is linked anew; without a linker the DSL loads the object as before.
GPU (marker ``gpu``): one child warms the kernel cache (records in a fresh user database, among
them a workspace split-K GEMM and a tf32 GEMM with a copied operand, and a conv); a fresh child
with the DSL and Optuna blocked serves them under policy ``cached`` from the cache and matches
torch; the occupancy query without the DSL equals the DSL's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from collections.abc import Iterator

from autocutlass.kernels import helper_kernels, shared_object
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import Activation

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")  # before any DSL import in this process: compiling off-GPU


@pytest.fixture(autouse=True, scope="module")
def _dsl_free_load() -> Iterator[None]:
    """These tests exercise the DSL-free loading path (on unless ``AUTOCUTLASS_DSL_FREE_LOAD=0``; set here);
    set for the whole module (before its module-scoped compiles); child processes inherit it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOCUTLASS_DSL_FREE_LOAD", "1")
        yield

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tuning_dbs"

BLOCK = """
import importlib.abc, sys
BLOCKED = tuple(sys.argv[1].split(","))
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: the serve path must not import it")
        return None
sys.meta_path.insert(0, _Block())
for _name in BLOCKED:
    sys.modules[_name] = None  # 'import cutlass' raises even where a finder is bypassed
def imported_blocked():
    return sorted(m for m, v in sys.modules.items() if m.split(".")[0] in BLOCKED and v is not None)
"""
"""Prepended to child scripts: importing a blocked package (the child's first argument, comma
separated) or a submodule of one raises."""

SERVE_BLOCKED = ("cutlass", "optuna")
"""What serving from the kernel cache never imports: the DSL (compiling) and Optuna (tuning)."""


def run_child(code: str, env: dict[str, str] | None = None, timeout: float = 600,
              blocked: tuple[str, ...] = SERVE_BLOCKED) -> dict[str, Any]:  # fmt: skip
    """Run ``BLOCK + code`` in a fresh interpreter from the repository root, with ``blocked``
    packages unimportable; its last stdout line is JSON."""
    r = subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code), ",".join(blocked)], cwd=REPO,
                       env=env or dict(os.environ), capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-6000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- the serve path on CPU, DSL and Optuna blocked ---------------------------------------------
_SERVE_CHILD = """
import json, os, torch
sympy_with_torch = "sympy" in sys.modules
from pathlib import Path
import autocutlass, autocutlass.api
from autocutlass import settings
from autocutlass.device import DeviceInfo, dsl_version
from autocutlass.dispatch import Dispatcher
from autocutlass.kernels import get_family, helper_kernels, shared_object
from autocutlass.kernels.hopper_gemm import compile as gemm_compile, runner as gemm_runner
from autocutlass.kernels.hopper_gemm.check import copied_operands, kernel_problem
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, SplitMode
from autocutlass.kernels.hopper_gemm.plan import make_plan
from autocutlass.ops.gemm.entries import MATMUL
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

cache = settings.current().kernel_cache_dir
loaded, launches = [], []

def load(path, name):  # stands in for dlopen + TVM-FFI: no GPU here
    assert path.is_file() and path.with_suffix(".o").is_file(), path
    loaded.append(path.name)
    return lambda *args: launches.append((name, len(args)))

shared_object.load = load
shared_object.can_link = lambda: True

def place(prefix, key):
    for suffix in (".o", ".so"):
        (cache / f"{prefix}-{key}{suffix}").write_bytes(b"stub")

cache.mkdir(parents=True, exist_ok=True)
fam = get_family("hopper_gemm")
info = DeviceInfo(index=0, gpu_name="NVIDIA H200", cc_major=9, cc_minor=0, sm_count=132,
                  max_smem_per_block_optin=232448, l2_bytes=60 << 20, total_memory_bytes=141 << 30,
                  driver_version="0", cuda_runtime_version="0", dsl_version=dsl_version(),
                  torch_version=torch.__version__)
hard_key = info.hard_key(fam.source_hash())
import sqlite3, types
from autocutlass.ops.registry import problem_from_dict
shipped = sqlite3.connect(Path(os.environ["AUTOCUTLASS_SHIPPED_DBS"]) / "NVIDIA-H200.sqlite")
stored = [types.SimpleNamespace(problem=problem_from_dict(json.loads(p)), config=json.loads(c)) for p, c in shipped.execute(
    "SELECT p.problem, b.config FROM best b JOIN problems p ON p.id = b.problem_id JOIN devices d ON d.id = b.device_id "
    "WHERE d.hard_key = ? AND b.family = 'hopper_gemm'", (hard_key.key(),))]
wanted = {"2000x3000x1000 bf16 row/row", "16x6144x4096 bf16 row/col", "4096x4096x4096 tf32 col/row",
          "4096x4096x4096 fp16 row/row"}
records = [b for b in stored if b.problem.describe().split(" ", 1)[1] in wanted]
assert len(records) == len(wanted), [b.problem.describe() for b in stored]
for rec in records:  # the kernel cache holds what the records name, and nothing else
    cfg = fam.config_from_dict(rec.config)
    place("hopper_gemm", gemm_compile.compile_key(make_plan(cfg, kernel_problem(rec.problem, cfg)), 2))
    if any(copied_operands(rec.problem, cfg)):
        place("transpose32", helper_kernels.transpose_key(2))

torch.backends.cuda.matmul.fp32_precision = "tf32"
gemm_runner._max_clusters.update({(0, 1): 132, (0, 2): 66, (0, 4): 32})  # the occupancy query needs a GPU
dtypes = {DType.BF16: torch.bfloat16, DType.FP16: torch.float16, DType.TF32: torch.float32}
d = Dispatcher(settings.current(), device_info=lambda index: info, on_gpu=lambda t: True)
with autocutlass.api.policy("cached"):
    for rec in records:
        p, dt = rec.problem, dtypes[rec.problem.a_dtype]
        a = torch.empty(p.m, p.k, dtype=dt) if p.a_major is Major.ROW else torch.empty(p.k, p.m, dtype=dt).t()
        b = torch.empty(p.k, p.n, dtype=dt) if p.b_major is Major.ROW else torch.empty(p.n, p.k, dtype=dt).t()
        d.call(MATMUL, a, b, None)

# A workspace split-K runner fetches the reduce kernel the same way.
split = GemmProblem(256, 512, 8192)
cfg = next(c for c in fam.space(split) if c.split_mode is SplitMode.WORKSPACE and fam.check(c, split) is None)
place("hopper_gemm", gemm_compile.compile_key(make_plan(cfg, kernel_problem(split, cfg)), 2))
place("splitk_reduce", helper_kernels.reduce_key(cfg.split_k, DType.BF16, None, False, split.epilogue.activation, 2))
fam.compile(cfg, split)

print(json.dumps({"stats": d.stats().as_dict(), "loaded": loaded, "launches": sorted(n for n, _ in launches),
                  "blocked_imported": imported_blocked(),
                  "sympy": "sympy" in sys.modules and not sympy_with_torch,
                  "dsl_modules": sorted(m for m in sys.modules if m.startswith("autocutlass.")
                                         and m.endswith((".transpose", ".reduce", ".kernel"))),
                  "tuning_modules": sorted(m for m in sys.modules
                                           if m.startswith(("autocutlass.search", "autocutlass.campaign.worker",
                                                            "autocutlass.db.queue")))}))
"""


def test_serve_path_imports_neither_dsl_nor_optuna_nor_sqlalchemy(tmp_path: Path) -> None:
    """The shipped records are looked up through the standard library's sqlite3 (``db.sqlite_read``):
    a hit needs no ORM; the user database, which does not exist yet, is not created by a lookup."""
    env = {**os.environ, "AUTOCUTLASS_CACHE_DIR": str(tmp_path), "AUTOCUTLASS_SHIPPED_DBS": str(SHIPPED),
           "AUTOCUTLASS_DB": str(tmp_path / "user.sqlite")}  # fmt: skip
    env.pop("AUTOCUTLASS_POLICY", None)
    out = run_child(_SERVE_CHILD, env, blocked=(*SERVE_BLOCKED, "sqlalchemy"))
    assert not (tmp_path / "user.sqlite").exists()
    stats = out["stats"]
    assert stats["db_hits"] == 4 and stats["compiles"] == 4 and stats["fallbacks"] == 0, stats
    assert out["launches"] == ["autocutlass_hopper_gemm"] * 4 + ["autocutlass_transpose32"], out
    names = out["loaded"]
    assert sum(n.startswith("hopper_gemm-") for n in names) == 5, names  # four records + the split-K runner
    assert sum(n.startswith("transpose32-") for n in names) == 1, names  # the tf32 col/row record copies B
    assert sum(n.startswith("splitk_reduce-") for n in names) == 1, names
    assert out["blocked_imported"] == [] and out["dsl_modules"] == [] and out["tuning_modules"] == [], out
    assert not out["sympy"], "the front-end's shape checks imported SymPy (torch's Python meta kernels do)"


# ---- the front-ends' result shapes without torch's meta kernels -----------------------------------
def test_result_shapes_computed_here_equal_torchs() -> None:
    """``_result_shape`` / ``_output_shape`` (no meta kernels, no SymPy) agree with torch's meta
    kernels wherever they answer, over a sweep of valid and invalid calls."""
    import itertools

    import torch
    import torch.nn.functional as F

    from autocutlass.ops.conv import frontend as conv_fe
    from autocutlass.ops.gemm import frontend as gemm_fe
    from autocutlass.ops.gemm.frontend import Op

    def meta(*shape: int, dt: torch.dtype = torch.bfloat16) -> torch.Tensor:
        return torch.empty(shape, dtype=dt, device="meta")

    answered = 0
    shapes = [(5, 7), (7, 3), (2, 5, 7), (2, 7, 3), (1, 7, 3), (3, 7, 3), (0, 7), (7, 0), (5, 6), (4,), (2, 2, 5, 7)]
    for (sa, sb), dt in itertools.product(itertools.product(shapes, repeat=2), (torch.bfloat16, torch.float64)):
        a, b = meta(*sa, dt=dt), meta(*sb, dt=dt)
        for op, bias, c in ((Op.MATMUL, None, None), (Op.GEMM, None, "same"), (Op.LINEAR, None, None),
                            (Op.LINEAR, meta(sb[0], dt=dt), None), (Op.LINEAR, meta(3, dt=dt), None)):  # fmt: skip
            try:
                want = tuple(F.linear(a, b, bias).shape) if op is Op.LINEAR else tuple(torch.matmul(a, b).shape)
            except RuntimeError:
                want = None
            cc = meta(*want, dt=dt) if c == "same" and want is not None else None
            got = gemm_fe._result_shape(gemm_fe.Call(op, a, b, c=cc, bias=bias))
            if got is not None:
                answered += 1
                assert got == want, (op, sa, sb, bias is not None)
    assert answered > 40
    answered = 0
    for n, c, k, hw, rs, stride, pad, dil in itertools.product((0, 2), (3, 4), (5,), (1, 6, 7), (1, 3), (1, 2),
                                                               ((0, 0), (1, 2), "same", "valid"), (1, 2)):  # fmt: skip
        x, w = meta(n, c, hw, hw + 1), meta(k, 3, rs, rs)
        try:
            want = tuple(F.conv2d(x, w, None, (stride, stride), pad, (dil, dil)).shape)
        except RuntimeError:
            want = None
        call = conv_fe.ConvCall(x, w, None, (stride, stride), pad, (dil, dil), 1, Activation.NONE, None)
        got = conv_fe._output_shape(call)
        if got is not None:
            answered += 1
            assert got == want, (n, c, hw, rs, stride, pad, dil)
    assert answered > 40


def test_import_autocutlass_is_light() -> None:
    out = run_child("""
        import json, autocutlass
        print(json.dumps({"heavy": sorted({m.split(".")[0] for m in sys.modules} & {"torch", "sqlalchemy", "tvm_ffi"}),
                          "blocked_imported": imported_blocked()}))
    """)  # fmt: skip
    assert out == {"heavy": [], "blocked_imported": []}


# ---- keys and caches without the DSL -----------------------------------------------------------
def test_helper_keys_equal_the_dsl_modules_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("cutlass")
    from autocutlass.kernels import transpose
    from autocutlass.kernels.hopper_gemm import reduce

    for arch in ("sm_90a", "sm_100a"):
        monkeypatch.setenv("CUTE_DSL_ARCH", arch)
        for rank in (2, 3):
            assert helper_kernels.transpose_key(rank) == transpose.transpose_compile_key(rank)
            for splits in (2, 3, 16):
                for d in reduce.D_DTYPES:
                    for c in (None, *reduce.D_DTYPES):
                        for bias, act in ((False, Activation.NONE), (True, Activation.GELU_TANH)):
                            args = (splits, d, c, bias, act, rank)
                            assert helper_kernels.reduce_key(*args) == reduce.reduce_compile_key(*args), args
    assert helper_kernels.TRANSPOSE_KEY_CONSTANTS == {"tile": transpose.TILE, "threads": transpose.THREADS,
                                                      "swizzle": transpose.SWIZZLE_MASK}  # fmt: skip
    assert (helper_kernels.TRANSPOSE_PREFIX, helper_kernels.TRANSPOSE_FUNCTION) == (
        transpose._CACHE.prefix, transpose.FUNCTION_NAME)  # fmt: skip
    assert (helper_kernels.REDUCE_PREFIX, helper_kernels.REDUCE_FUNCTION) == (reduce._CACHE.prefix, reduce.FUNCTION_NAME)
    assert helper_kernels.transpose_source_hash() == transpose.own_source_hash()


def test_tail_zero_key_equals_the_dsl_modules_key(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("cutlass")
    from autocutlass.kernels import tail_zero

    for arch in ("sm_90a", "sm_100a"):
        monkeypatch.setenv("CUTE_DSL_ARCH", arch)
        for width in tail_zero.WIDTHS:
            assert helper_kernels.tail_zero_key(width) == tail_zero.tail_zero_compile_key(width)
    assert helper_kernels.tail_zero_key(16) != helper_kernels.tail_zero_key(32)
    assert helper_kernels.TAIL_ZERO_KEY_CONSTANTS == {"threads": tail_zero.THREADS, "max_ctas": tail_zero.MAX_CTAS}
    assert (helper_kernels.TAIL_ZERO_PREFIX, helper_kernels.TAIL_ZERO_FUNCTION) == (
        tail_zero._CACHE.prefix, tail_zero.FUNCTION_NAME)  # fmt: skip


def test_caches_of_one_prefix_share_their_state() -> None:
    a, b, other = ObjectCache("t_shared", "f"), ObjectCache("t_shared", "f"), ObjectCache("t_other", "f")
    a.memory["k"] = "fn"
    assert b.find("k", None) == "fn" and a.stats.memory_hits == 1
    assert other.find("k", None) is None


def test_runtime_library_is_the_dsls_choice(tmp_path: Path) -> None:
    for flavour in ("cu12", "cu13"):
        (tmp_path / flavour / "lib").mkdir(parents=True)
        (tmp_path / flavour / "lib" / shared_object.RUNTIME_NAME).write_bytes(b"")
    choose = shared_object.choose_runtime
    assert choose(None, tmp_path, 13) == tmp_path / "cu13" / "lib" / shared_object.RUNTIME_NAME
    assert choose(None, tmp_path, 12) == tmp_path / "cu12" / "lib" / shared_object.RUNTIME_NAME
    assert choose(None, tmp_path, None) == tmp_path / "cu13" / "lib" / shared_object.RUNTIME_NAME  # no driver: newest
    assert choose(None, tmp_path, 11) is None
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / shared_object.RUNTIME_NAME).write_bytes(b"")
    assert choose(None, tmp_path, 11) == tmp_path / "lib" / shared_object.RUNTIME_NAME
    assert choose(f"/x/libother.so{os.pathsep}/y/{shared_object.RUNTIME_NAME}", tmp_path, 13) == Path(
        f"/y/{shared_object.RUNTIME_NAME}")  # fmt: skip


# ---- real exported objects, loaded without the DSL ---------------------------------------------
@pytest.fixture(scope="module")
def compiled_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernel cache holding a rank-2 transpose and one bf16 GEMM class, compiled here (the DSL
    imported in this process; about 20 s)."""
    pytest.importorskip("cutlass")
    from autocutlass.kernels.hopper_gemm.compile import get_compiled
    from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig
    from autocutlass.kernels.transpose import get_transpose
    from autocutlass.ops.gemm.problem import GemmProblem

    from autocutlass.kernels import transpose
    from autocutlass.kernels.hopper_gemm import compile as gemm_compile

    cache = tmp_path_factory.mktemp("cold_start_cache")
    t_mem, g_mem = dict(transpose._memory), dict(gemm_compile._memory)
    get_transpose(2, cache)
    get_compiled(HopperGemmConfig(128, 128, 64), GemmProblem(256, 256, 256), 2, cache)
    for memory, before in ((transpose._memory, t_mem), (gemm_compile._memory, g_mem)):
        for key in set(memory) - set(before):
            del memory[key]  # leave this process's caches as found: other tests count their compiles
    return cache


_REAL_CHILD = """
import json, torch
from pathlib import Path
from autocutlass.kernels import helper_kernels
from autocutlass.kernels.hopper_gemm.compile import get_compiled, STATS
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig
from autocutlass.ops.gemm.problem import GemmProblem

cache = Path(sys.argv[1])
answers = {}
t = helper_kernels.get_transpose(2, cache)
g = get_compiled(HopperGemmConfig(128, 128, 64), GemmProblem(256, 256, 256), 2, cache)
for name, fn, args in (("transpose", t, (torch.zeros(8, 8), torch.zeros(8, 8))),
                       ("gemm", g, (torch.zeros(256, 256, dtype=torch.bfloat16),) * 3 + (None,) * 6 + (1.0, 0.0, 1))):
    try:
        fn(*args)
        answers[name] = "launched"
    except Exception as e:  # CPU tensors: the compiled signature's checks refuse them
        answers[name] = f"{type(e).__name__}: {e}"
print(json.dumps({"type": type(g).__module__ + "." + type(g).__name__, "answers": answers,
                  "gemm_stats": [STATS.compiled, STATS.disk_hits], "blocked_imported": imported_blocked()}))
"""


@pytest.mark.compile
def test_real_objects_load_through_tvm_ffi_without_the_dsl(compiled_cache: Path) -> None:
    if not shared_object.can_link():
        pytest.skip("no C compiler driver or CuTe DSL runtime library: objects load through the DSL here")
    libs = sorted(compiled_cache.glob("*.so"))
    assert [p.name.split("-")[0] for p in libs] == ["hopper_gemm", "transpose32"], libs  # linked when compiled
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}

    def child() -> dict[str, Any]:
        return run_child(_REAL_CHILD.replace("sys.argv[1]", repr(str(compiled_cache))), env)

    def check(out: dict[str, Any]) -> None:
        assert out["type"].startswith("tvm_ffi") and out["blocked_imported"] == [], out
        assert out["gemm_stats"] == [0, 1], out
        for name, answer in out["answers"].items():
            assert "device_type=cuda" in answer, (name, answer)  # the kernel's own argument check

    check(child())
    for lib in libs:
        lib.unlink()  # a cache written before libraries existed: linked on first load, no DSL
    check(child())
    assert all(lib.is_file() for lib in libs)
    for lib in libs:
        lib.write_bytes(b"damaged")  # linked anew
    check(child())
    assert all(lib.stat().st_size > 1000 for lib in libs)


@pytest.mark.compile
def test_without_a_linker_the_dsl_loads_the_object(compiled_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.kernels import transpose

    monkeypatch.setattr(shared_object, "can_link", lambda: False)
    key = transpose.transpose_compile_key(2)
    had = transpose._memory.pop(key, None)
    before = (transpose.STATS.compiled, transpose.STATS.disk_hits)
    try:
        fn = transpose.get_transpose(2, compiled_cache)
        assert fn is not None and (transpose.STATS.compiled, transpose.STATS.disk_hits) == (before[0], before[1] + 1)
        assert "tvm_ffi" in type(fn).__module__
    finally:
        transpose._memory.pop(key, None)
        if had is not None:
            transpose._memory[key] = had


# ---- GPU: a fresh process serves from the kernel cache with the DSL blocked ------------------------
_GPU_CASES = """
import torch
from autocutlass.kernels import get_family
from autocutlass.kernels.hopper_gemm.check import copied_operands
from autocutlass.kernels.hopper_gemm.config import SplitMode

def cases():
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s, dt=torch.bfloat16: torch.randn(*s, device="cuda", generator=g).to(dt)
    x = r(8, 64, 28, 28).contiguous(memory_format=torch.channels_last)
    w = r(96, 64, 3, 3).contiguous(memory_format=torch.channels_last)
    return {
        "bf16": (r(1000, 2000), r(2000, 3000)),
        "splitk": (r(256, 8192), r(8192, 512)),
        "tf32_col_a": (r(1024, 768, dt=torch.float32).t(), r(1024, 512, dt=torch.float32)),
        "conv": (x, w),
    }

def pick(name, problem):
    fam = get_family("hopper_gemm")
    ok = [c for c in [*fam.seeds(problem), *fam.space(problem)] if fam.check(c, problem) is None]
    if name == "splitk":
        return next(c for c in ok if c.split_k > 1 and c.split_mode is SplitMode.WORKSPACE)
    if name == "tf32_col_a":
        return next(c for c in ok if any(copied_operands(problem, c)) and c.split_k == 1)
    return ok[0]

def run(name, args):
    import autocutlass
    if name == "conv":
        return autocutlass.conv2d(*args, padding=1), torch.nn.functional.conv2d(*args, padding=1)
    return autocutlass.matmul(*args), torch.matmul(*args)
"""

_GPU_WARM = _GPU_CASES + """
import json, autocutlass
from autocutlass import settings
from autocutlass.db import TuningStore
from autocutlass.device import current_device
torch.backends.cuda.matmul.fp32_precision = "tf32"
torch.backends.cudnn.allow_tf32 = True
fam = get_family("hopper_gemm")
hard_key = current_device().hard_key(fam.source_hash())
store = TuningStore(settings.current().db_url)
data = cases()
for name, args in data.items():  # a miss: records the problem, runs the default config (compiled)
    run(name, args)
for problem in store.pending_misses(hard_key):  # store the configs the cases are to exercise
    name = {(1000, 3000): "bf16", (256, 512): "splitk", (768, 512): "tf32_col_a"}[(problem.m, problem.n)]
    store.record_best(problem, hard_key, fam.name, fam.config_to_dict(pick(name, problem)), 1.0, 1.0)
autocutlass.reset()
for name, args in data.items():  # served from the records: compiles what they name
    run(name, args)
torch.cuda.synchronize()
print(json.dumps(autocutlass.stats().as_dict()))
"""

_GPU_SERVE = _GPU_CASES + """
import json, time
from autocutlass.ops.compare import REL_FROBENIUS_TOL, compare
from autocutlass.ops.types import DType
torch.backends.cuda.matmul.fp32_precision = "tf32"
torch.backends.cudnn.allow_tf32 = True
data = cases()
torch.cuda.synchronize()
t0 = time.perf_counter()
out = {}
for name, args in data.items():
    got, ref = run(name, args)
    torch.cuda.synchronize()
    out[name] = compare(got, ref.float(), REL_FROBENIUS_TOL[DType.TF32 if got.dtype == torch.float32 else DType.BF16],
                        str(got.dtype))
first_calls_s = time.perf_counter() - t0
import autocutlass
from autocutlass.kernels.hopper_gemm import compile as gc
from autocutlass.kernels.hopper_conv import compile as cc
from autocutlass.kernels.object_cache import ObjectCache
helpers = [ObjectCache(p, f).stats.disk_hits for p, f in (("splitk_reduce", "autocutlass_splitk_reduce"),
                                                         ("transpose32", "autocutlass_transpose32"))]
print(json.dumps({"checks": out, "stats": autocutlass.stats().as_dict(), "first_calls_s": first_calls_s,
                  "compiled": gc.STATS.compiled + cc.STATS.compiled, "gemm_disk_hits": gc.STATS.disk_hits,
                  "conv_disk_hits": cc.STATS.disk_hits, "helper_disk_hits": helpers,
                  "blocked_imported": imported_blocked()}))
"""


@pytest.mark.gpu
def test_gpu_fresh_process_serves_from_the_kernel_cache_without_the_dsl(tmp_path: Path) -> None:
    env = {**os.environ, "AUTOCUTLASS_CACHE_DIR": str(tmp_path), "AUTOCUTLASS_DB": str(tmp_path / "user.sqlite"),
           "AUTOCUTLASS_SHIPPED_DBS": "off", "AUTOCUTLASS_POLICY": "cached"}  # fmt: skip
    env.pop("AUTOCUTLASS_STRICT", None)
    warm = subprocess.run([sys.executable, "-c", _GPU_WARM], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900, check=False)  # fmt: skip
    assert warm.returncode == 0, warm.stderr[-6000:]
    assert json.loads(warm.stdout.strip().splitlines()[-1])["fallbacks"] == 0, warm.stdout
    out = run_child(_GPU_SERVE, env)
    assert all(ok for ok, _ in out["checks"].values()), out["checks"]
    s = out["stats"]
    assert s["fallbacks"] == 0 and s["db_hits"] == 3 and s["tunes"] == 0, out  # the conv: default config, no record
    assert out["compiled"] == 0 and out["gemm_disk_hits"] == 3 and out["conv_disk_hits"] == 1, out
    assert out["helper_disk_hits"] == [1, 1] and out["blocked_imported"] == [], out
    print(f"first calls of 4 cases in a fresh process without the DSL: {out['first_calls_s']:.2f} s")


@pytest.mark.gpu
def test_gpu_occupancy_without_the_dsl_equals_the_dsls() -> None:
    pytest.importorskip("cutlass")
    import cutlass.utils
    import torch

    from autocutlass.kernels import occupancy

    torch.zeros(1, device="cuda")  # a current context, as in any runner call
    dev = torch.cuda.current_device()
    for size in (1, 2, 4, 8, 16):
        assert occupancy.max_active_clusters(dev, size) == cutlass.utils.HardwareInfo(dev).get_max_active_clusters(size)


def test_dsl_free_load_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.kernels.object_cache import dsl_free_load

    monkeypatch.delenv("AUTOCUTLASS_DSL_FREE_LOAD", raising=False)
    assert dsl_free_load()
    for off in ("0", "off", "false", "no"):
        monkeypatch.setenv("AUTOCUTLASS_DSL_FREE_LOAD", off)
        assert not dsl_free_load()


# ---- the shipped compiled kernels ------------------------------------------------------------
_SHIPPED_KERNELS_CHILD = """
import json
from pathlib import Path
from autocutlass.cli.kernels_warm import _records, plan_jobs, seed_jobs
from autocutlass.db.layered import shipped_db_paths
from autocutlass.kernels import get_family
from autocutlass.kernels.object_cache import _STATES
from autocutlass.ops.registry import problem_from_dict

cache = Path(sys.argv[2])
records = [r for p in shipped_db_paths(Path(sys.argv[3])) for r in _records(str(p), True, None)]
jobs, skipped = plan_jobs(records)
jobs += seed_jobs(["benchmarks/shapes.json", "benchmarks/shapes-online.json"])[0]  # the tuner's first candidates
failed = []
for name, cfg, prob in jobs:
    fam = type(get_family(name))(cache_dir=cache)
    try:
        fam.compile(fam.config_from_dict(cfg), problem_from_dict(prob))
    except Exception as e:  # noqa: BLE001
        failed.append(f"{name} {cfg}: {type(e).__name__}: {e}"[:300])
stats = [s.stats for s in _STATES.values()]
print(json.dumps({"records": len(records), "jobs": len(jobs), "failed": failed[:5], "blocked_imported": imported_blocked(),
                  "compiled": sum(s.compiled for s in stats), "shipped_hits": sum(s.shipped_hits for s in stats)}))
"""


def test_every_shipped_records_kernel_loads_from_the_shipped_objects_without_the_dsl(tmp_path: Path) -> None:
    """``tuning_dbs/kernels.tar.xz`` holds the compiled object of every kernel the shipped
    databases' records run (with these sources and this DSL), and of the tuner's seed configs of
    the GEMM suites' cases: a fresh process with an empty kernel cache and the DSL blocked builds
    every one of their runners from those objects. (When kernel
    sources change, the records go stale with them and are not checked; re-tuned records need
    ``autocutlass kernels warm --db tuning_dbs/<gpu>.sqlite ... --seeds benchmarks/shapes.json --seeds
    benchmarks/shapes-online.json --archive tuning_dbs/kernels.tar.xz``, README's Architecture.)"""
    pytest.importorskip("cutlass")
    from autocutlass.cli.kernels_warm import GATE_VARIABLES

    env = {**os.environ, "AUTOCUTLASS_SHIPPED_KERNELS": str(SHIPPED / "kernels.tar.xz"), "AUTOCUTLASS_DSL_FREE_LOAD": "1",
           **dict.fromkeys(GATE_VARIABLES, "1")}  # records of families switched off by default load too  # fmt: skip
    code = "import sys\n" + _SHIPPED_KERNELS_CHILD
    r = subprocess.run([sys.executable, "-c", BLOCK + code, ",".join(SERVE_BLOCKED), str(tmp_path / "cache"), str(SHIPPED)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-6000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["jobs"] > 0 and out["failed"] == [] and out["blocked_imported"] == [], out
    assert out["compiled"] == 0 and out["shipped_hits"] > 0, out  # jobs sharing a compile key load once
