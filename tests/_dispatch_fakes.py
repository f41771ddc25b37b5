"""A stubbed kernel layer for dispatch tests on CPU: a fake family whose runner checks the
calling convention of ``kernels.base`` and computes with torch, a dict store, a counting tuner."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F

from autocutlass.device import DeviceInfo, HardKey
from autocutlass.dispatch import Dispatcher, Layers
from autocutlass.errors import DatabaseError
from autocutlass.ops.conv.frontend import CONV2D
from autocutlass.ops.gemm.entries import GEMM, LINEAR, MATMUL, SCALED_MM
from autocutlass.ops.gemm.problem import Activation, DType, Major, GemmProblem
from autocutlass.settings import Policy, Settings


def device_info(cc: tuple[int, int] = (9, 0)) -> DeviceInfo:
    return DeviceInfo(
        index=0, gpu_name="Fake H100", cc_major=cc[0], cc_minor=cc[1], sm_count=132,
        max_smem_per_block_optin=232_448, l2_bytes=50 << 20, total_memory_bytes=80 << 30,
        driver_version="0", cuda_runtime_version="0", dsl_version="0", torch_version=torch.__version__,
    )  # fmt: skip


HARD_KEY = device_info().hard_key("fake")


@dataclass(frozen=True)
class FakeConfig:
    tile: int = 128


@dataclass
class Launch:
    config: FakeConfig
    problem: GemmProblem
    a: torch.Tensor
    b: torch.Tensor
    d: torch.Tensor
    c: torch.Tensor | None
    bias: torch.Tensor | None
    alpha: float
    beta: float
    scale_a: torch.Tensor | None = None
    scale_b: torch.Tensor | None = None


def _act(y: torch.Tensor, act: Activation) -> torch.Tensor:
    return {
        Activation.NONE: lambda t: t,
        Activation.RELU: F.relu,
        Activation.GELU: F.gelu,
        Activation.GELU_TANH: lambda t: F.gelu(t, approximate="tanh"),
        Activation.SILU: F.silu,
    }[act](y)


class FakeRunner:
    """Asserts what the real runner relies on, then computes D in fp32 with torch."""

    def __init__(self, family: FakeFamily, config: FakeConfig, problem: GemmProblem) -> None:
        self.family, self.config, self.problem = family, config, problem

    def __call__(self, a, b, d, *, c=None, bias=None, alpha=1.0, beta=0.0, **scales) -> None:  # noqa: ANN001, ANN003
        p = self.problem
        if p.a_dtype is DType.E4M3:  # fp8: the two per-tensor scales, as (1,) float32 tensors
            assert set(scales) == {"scale_a", "scale_b"}, scales
            for s in scales.values():
                assert s.shape == (1,) and s.dtype is torch.float32 and s.device == a.device, s
        else:  # the other dtypes' runners are called exactly as before the fp8 entry point existed
            assert not scales, f"scale arguments given to a {p.a_dtype.value} runner: {sorted(scales)}"
        rank = 3 if p.l > 1 else 2
        assert a.dim() == b.dim() == d.dim() == rank, (a.shape, b.shape, d.shape, p)
        m, k = a.shape[-2:]
        n = 2 * d.shape[-1] if p.epilogue.swiglu else d.shape[-1]  # SwiGLU: B's gate and up columns, D's half
        assert b.shape[-2:] == (k, n) and d.shape[-2] == m and (bias is None or bias.shape == (n,))
        for name, t, major in (("a", a, p.a_major), ("b", b, p.b_major), ("d", d, Major.ROW)):
            unit = -1 if major is Major.ROW else -2
            assert t.stride(unit) == 1, f"{name} {major} needs stride 1 in dim {unit}: {t.stride()}"
            for i, s in enumerate(t.stride()):
                if i != t.dim() + unit:
                    assert s != 0 and (s * t.element_size()) % 16 == 0, f"{name} stride {t.stride()} not TMA-able"
            assert t.data_ptr() % 16 == 0, f"{name} base not 16-byte aligned"
        assert (c is not None) == p.epilogue.with_c and (bias is not None) == p.epilogue.bias
        if c is not None:
            assert c.shape == d.shape and c.stride(-1) == 1
        assert isinstance(alpha, float) and isinstance(beta, float)
        self.family.launches.append(Launch(self.config, p, a, b, d, c, bias, alpha, beta, **scales))
        r = alpha * torch.matmul(a.float(), b.float())
        if scales:
            r = r * scales["scale_a"] * scales["scale_b"]
        if c is not None and not p.epilogue.c_mul:
            r = r + beta * c.float()
        if bias is not None:
            r = r + bias.float()
        if p.epilogue.swiglu:
            gate, up = r.chunk(2, dim=-1)
            d.copy_(F.silu(gate) * up)
            return
        r = _act(r, p.epilogue.activation)
        d.copy_(r * c.float() if c is not None and p.epilogue.c_mul else r)  # the gated epilogue multiplies


class FakeFamily:
    """Serves what TMA can: every operand 16-byte aligned. Configs are FakeConfig(tile)."""

    name = "fake"

    def __init__(self) -> None:
        self.launches: list[Launch] = []
        self.compiled: list[tuple[FakeConfig, GemmProblem]] = []
        self.compile_error: Exception | None = None
        self.misfit = False

    def source_hash(self) -> str:
        return "fake"

    def supports(self, problem: Any) -> str | None:
        lowering = getattr(problem, "gemm_lowering", None)
        if lowering is not None:
            lowered = lowering()
            if lowered is None:
                return f"{problem.describe()} is not a GEMM"
            problem = lowered.gemm
        for name in ("align_a", "align_b", "align_d"):
            if getattr(problem, name) < 16:
                return f"{name}={getattr(problem, name)} < 16"
        return None

    def check(self, config: FakeConfig, problem: GemmProblem) -> str | None:
        return None if config.tile in (64, 128, 256) else f"tile={config.tile} is not 64, 128 or 256"

    def seeds(self, problem: GemmProblem) -> list[FakeConfig]:
        return [FakeConfig(128), FakeConfig(64)]

    def fits(self, config: FakeConfig, tuned: Any, problem: Any) -> bool:
        """Every config fits every problem of its bucket, unless ``misfit`` is set: then none fits
        a problem other than its own (``KernelFamily.fits``)."""
        return not self.misfit or tuned == problem

    def config_from_dict(self, d: dict[str, Any]) -> FakeConfig:
        return FakeConfig(**d)

    def compile(self, config: FakeConfig, problem: Any) -> Any:
        if self.compile_error is not None:
            raise self.compile_error
        self.compiled.append((config, problem))
        lowering = getattr(problem, "gemm_lowering", None)
        if lowering is not None:  # a pointwise convolution: the GEMM runner behind the op's adapter
            lowered = lowering()
            return lowered.runner(FakeRunner(self, config, lowered.gemm))
        return FakeRunner(self, config, problem)


@dataclass(frozen=True)
class Record:
    family: str
    config: dict[str, Any]
    source: str
    sibling: bool = False
    hard_key: HardKey = HARD_KEY
    problem: Any = None
    """The problem the record was tuned for (None: not compared)."""
    median_ms: float = 1.0


@dataclass
class FakeStore:
    """lookup -> ``records[problem.key()]`` else ``fallback`` (a bucket/nearest record);
    lookup_sibling -> ``sibling`` (a record measured on a sibling GPU); class_winners ->
    ``class_records`` (winners of other problems of the same kernel class); a lookup under a
    vendor hard key (``autocutlass.vendor``) -> ``vendor[problem.key()]``."""

    records: dict[str, Record] = field(default_factory=dict)
    fallback: Record | None = None
    sibling: Record | None = None
    class_records: list[Record] = field(default_factory=list)
    lookups: list[GemmProblem] = field(default_factory=list)
    sibling_lookups: list[GemmProblem] = field(default_factory=list)
    misses: list[GemmProblem] = field(default_factory=list)
    fail_lookup: bool = False
    vendor: dict[str, Record] = field(default_factory=dict)
    vendor_lookups: list[tuple[GemmProblem, HardKey]] = field(default_factory=list)

    def lookup(self, problem: GemmProblem, hard_key: HardKey) -> Record | None:
        if hard_key.kernel_hash.startswith("torch-"):
            assert hard_key == replace(HARD_KEY, kernel_hash=hard_key.kernel_hash)
            self.vendor_lookups.append((problem, hard_key))
            return self.vendor.get(problem.key())
        assert hard_key == HARD_KEY
        self.lookups.append(problem)
        if self.fail_lookup:
            raise DatabaseError("fake database is broken")
        return self.records.get(problem.key(), self.fallback)

    def lookup_sibling(self, problem: GemmProblem, hard_key: HardKey) -> Record | None:
        assert hard_key == HARD_KEY
        self.sibling_lookups.append(problem)
        if self.fail_lookup:
            raise DatabaseError("fake database is broken")
        return self.sibling

    def class_winners(self, problem: GemmProblem, hard_key: HardKey, *, limit: int) -> list[Record]:
        assert hard_key == HARD_KEY
        if self.fail_lookup:
            raise DatabaseError("fake database is broken")
        return self.class_records[:limit]

    def record_miss(self, problem: GemmProblem, hard_key: HardKey) -> None:
        self.misses.append(problem)


class FakeTuner:
    def __init__(self, result: dict[str, Any] | None = None, delay_s: float = 0.0) -> None:
        self.result = {"tile": 256} if result is None else result
        self.delay_s = delay_s
        self.calls: list[GemmProblem] = []
        self.seeds: list[tuple[dict[str, Any], ...]] = []
        self.lock = threading.Lock()

    def __call__(self, problem, family, sink, hard_key, device_index, settings, *, seeds=(), stop=None):  # noqa: ANN001
        with self.lock:
            self.calls.append(problem)
            self.seeds.append(tuple(seeds))
        time.sleep(self.delay_s)
        return self.result or None


def settings(tmp_path=None, **kw: Any) -> Settings:  # noqa: ANN001
    env = {"AUTOCUTLASS_SHIPPED_DBS": "off"}
    if tmp_path is not None:
        env["AUTOCUTLASS_CACHE_DIR"] = str(tmp_path)
    s = Settings.from_env(env)
    return Settings(**{**s.__dict__, **kw})


@dataclass
class Rig:
    """A dispatcher over the fakes, treating CPU tensors as if they were on an sm_90 GPU."""

    dispatcher: Dispatcher
    family: FakeFamily
    store: FakeStore
    tuner: FakeTuner

    def misses(self) -> list[Any]:
        """The misses recorded, once the dispatcher's miss writes under way are done (``cached``,
        ``background`` and captures write them on a thread of their own)."""
        self.dispatcher.wait_for_miss_writes()
        return self.store.misses


def make_rig(policy: Policy = Policy.TUNE, *, strict: bool = False, store: FakeStore | None = None,
             tuner: FakeTuner | None = None, cc: tuple[int, int] = (9, 0), open_error: bool = False) -> Rig:
    fam = FakeFamily()
    st = store if store is not None else FakeStore()
    tn = tuner if tuner is not None else FakeTuner()

    def open_store(s: Settings) -> tuple[FakeStore, FakeStore]:
        if open_error:
            raise DatabaseError("cannot open fake database")
        return st, st

    def get_family(name: str) -> FakeFamily:
        if name != fam.name:
            raise KeyError(name)
        return fam

    layers = Layers(get_family=get_family, families_for=lambda p: [fam] if fam.supports(p) is None else [],
                    open_store=open_store, tune=tn, why_unsupported=lambda p: fam.supports(p) or "")  # fmt: skip
    d = Dispatcher(
        settings(policy=policy, strict=strict), layers=layers, device_info=lambda i: device_info(cc),
        on_gpu=lambda t: True,
    )  # fmt: skip
    return Rig(d, fam, st, tn)



class Calls:
    """The public entry points' signatures over one dispatcher (``Dispatcher.call`` with each
    op's front-end), so that tests read like user code."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher

    def matmul(self, a: Any, b: Any, out: Any = None) -> Any:
        return self.d.call(MATMUL, a, b, out)

    def linear(self, x: Any, weight: Any, bias: Any = None, activation: Any = None, residual: Any = None,
               mul: Any = None) -> Any:  # fmt: skip
        return self.d.call(LINEAR, x, weight, bias, activation, residual, mul)

    def gemm(self, a: Any, b: Any, c: Any = None, alpha: Any = 1.0, beta: Any = 0.0, out: Any = None) -> Any:
        return self.d.call(GEMM, a, b, c, alpha, beta, out)

    def scaled_mm(self, a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any = None, out_dtype: Any = None,
                  out: Any = None, activation: Any = None, use_fast_accum: Any = False,
                  scale_result: Any = None) -> Any:  # fmt: skip
        return self.d.call(SCALED_MM, a, b, scale_a, scale_b, bias, out_dtype, out, activation, use_fast_accum,
                           scale_result)  # fmt: skip

    def conv2d(self, x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
               groups: Any = 1, activation: Any = None, residual: Any = None) -> Any:  # fmt: skip
        return self.d.call(CONV2D, x, weight, bias, stride, padding, dilation, groups, activation, residual)


def calls(dispatcher: Dispatcher) -> Calls:
    return Calls(dispatcher)
