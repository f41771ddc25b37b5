"""The callable a compiled Hopper GEMM becomes: torch tensors in, one launch on the current stream.

Serving needs no DSL: the compiled GEMM comes from the kernel cache (``kernels.object_cache``,
loaded through TVM-FFI), the split-K reduce and the transpose through ``kernels.helper_kernels``
and the persistent grid's bound from ``kernels.occupancy``. The DSL is imported only to compile
a kernel missing from the cache (tests/test_cold_start.py holds this)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from autocutlass.kernels import budgets, occupancy
from autocutlass.kernels.helper_kernels import get_reduce, get_transpose
from autocutlass.kernels.hopper_gemm.check import copied_operands, kernel_problem
from autocutlass.kernels.hopper_gemm.compile import get_compiled
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, SplitMode
from autocutlass.ops.launch import on_default_stream
from autocutlass.ops.gemm.problem import DType, GemmProblem

log = logging.getLogger("autocutlass")

_clusters_lock = threading.Lock()
_max_clusters: dict[tuple[int, int], int] = {}


def max_active_clusters(device_index: int, cluster_size: int) -> int:
    """Clusters of ``cluster_size`` CTAs (one per SM) that can be resident at once, from the
    driver's occupancy API (``kernels.occupancy``, no DSL; the DSL's ``HardwareInfo`` if that
    fails); read once per (device, cluster size)."""
    key = (device_index, cluster_size)
    got = _max_clusters.get(key)
    if got is not None:
        return got
    with _clusters_lock:
        if key not in _max_clusters:
            try:
                n = occupancy.max_active_clusters(device_index, cluster_size)
            except (RuntimeError, ValueError, AttributeError) as e:
                log.warning("autocutlass: occupancy query failed (%s); asking the CuTe DSL", e)
                n = _dsl_max_active_clusters(device_index, cluster_size)
            if n <= 0:
                n = budgets.SM_COUNT_SM90 // cluster_size
            _max_clusters[key] = n
        return _max_clusters[key]


def _dsl_max_active_clusters(device_index: int, cluster_size: int) -> int:
    """``cutlass.utils.HardwareInfo``'s answer (it compiles an empty kernel), or 0."""
    try:
        import cutlass.utils

        return int(cutlass.utils.HardwareInfo(device_index).get_max_active_clusters(cluster_size))
    except (RuntimeError, ValueError, AttributeError):
        return 0


class SplitKWorkspace:
    """Split-K scratch of one runner: an fp32 partial-sum buffer and zeroed int32 turnstiles,
    per device, grown on demand and reused across calls on the default stream; on any other
    stream (graph capture, torch.compile's CUDA graphs) allocated per call (see ``get``).
    Serial mode: a tile slot and a turnstile per output tile (the kernel leaves every turnstile
    at zero when it finishes). Workspace mode: ``S * L * M * N_pad`` partials, no turnstiles.
    Stream-K: a tile slot and a flag per CTA of the grid (flags also left at zero).

    ``poison`` (verification, before each launch) fills the partial sums with NaN, now and in
    every buffer allocated after: a kernel that reads a partial before its writer stored it (a
    turnstile or flag race) would otherwise read the previous launch's sums, the right values
    when the same operands are launched again."""

    def __init__(self) -> None:
        self._bufs: dict[int, tuple[Any, Any]] = {}  # per device index: the default stream's buffers
        self._poisoned = False

    def poison(self) -> None:
        """NaN in every partial-sum buffer held, and in those allocated from now on."""
        self._poisoned = True
        for work, _ in self._bufs.values():
            work.fill_(float("nan"))

    def slabs(self, device: Any, splits: int, l: int, m: int, n: int) -> tuple[Any, Any]:  # noqa: E741
        """Workspace mode's buffer and its (splits, l, m, N_pad) fp32 slab view, rows padded to a
        multiple of 4 elements (16 bytes): what the kernel writes and the slab sum reads."""
        n_pad = -(-n // 4) * 4
        count = splits * l * m * n_pad
        work, _ = self.get(device, count, 0)
        return work, work[:count].view(splits, l, m, n_pad)

    def _new_work(self, partials: int, device: Any) -> Any:
        import torch

        work = torch.empty(partials, dtype=torch.float32, device=device)
        return work.fill_(float("nan")) if self._poisoned else work

    def get(self, device: Any, partials: int, turnstiles: int) -> tuple[Any, Any]:
        import torch

        index = device.index or 0
        if not on_default_stream(index):
            # Not the default stream: CUDA-graph capture, or torch.compile's cudagraph trees, whose
            # warm-up and recording run on a side stream with allocations routed to the graph's
            # private pool: a buffer kept from there is a live tensor the graph does not own
            # ("tensors in the cudagraph pool not tracked as outputs"). A call's own temporaries
            # are freed when it returns; the zeroed turnstiles cost one memset (a graph node).
            return self._new_work(partials, device), torch.zeros(turnstiles, dtype=torch.int32, device=device)
        have = self._bufs.get(index)
        if have is None or have[0].numel() < partials or have[1].numel() < turnstiles:
            work = self._new_work(partials, device)
            count = torch.zeros(turnstiles, dtype=torch.int32, device=device)
            have = (work, count)
            self._bufs[index] = have
        return have


def scratch_slots(cfg: Any, m: int, n: int, l: int, clusters: int) -> int:  # noqa: E741
    """Serial split-K's and stream-K's scratch slots (partial tiles and turnstiles) of a kernel
    with the GEMM kernel's consumers (``cfg``: tile, cluster, ``stream_k``) writing an l x m x n
    D, on a grid of ``clusters`` clusters: stream-K one per CTA of the grid (it has at most this
    many), else one per output tile, tiles padded to whole clusters as the kernel numbers them."""
    if cfg.stream_k:
        return clusters * cfg.cluster_size
    return (-(-m // (cfg.tile_m * cfg.cluster_m)) * cfg.cluster_m * -(-n // (cfg.tile_n * cfg.cluster_n))
            * cfg.cluster_n * l)  # fmt: skip


TRANSPOSE_TILE = 64
"""``autocutlass.kernels.transpose.TILE`` (not imported here: that module loads the DSL)."""
TRANSPOSE_MAX_CTAS = 2**31 - 1
"""The transpose kernel's flat grid: ceil(C/TILE) * ceil(R/TILE) * L CTAs must fit in it."""


def transpose_accepts(src: Any) -> bool:
    """Whether ``autocutlass.kernels.transpose`` can read ``src`` ((.., R, C), C contiguous):
    fp32, unit last stride, every other stride a multiple of 4 elements and a 16-byte-aligned
    base (its 16-byte loads), 32-bit extents and a grid that fits. A source that is not is
    copied by torch."""
    import torch

    if src.dtype != torch.float32 or src.dim() not in (2, 3) or src.stride(-1) != 1:
        return False
    if any(s % 4 for s in src.stride()[:-1]) or src.data_ptr() % 16:
        return False
    r, c = src.shape[-2], src.shape[-1]
    batches = src.shape[0] if src.dim() == 3 else 1
    t = TRANSPOSE_TILE
    return max(r, c, batches) < 2**31 and -(-r // t) * -(-c // t) * batches <= TRANSPOSE_MAX_CTAS


def k_major_copy(x: Any, rows_contiguous_k: bool, transpose: Any | None = None) -> Any:
    """A K-major copy of a tf32 operand whose rows are 16-byte aligned: A (.., M, K) as row-major,
    B (.., K, N) as column-major (a transposed row-major buffer). The K extent is padded to a
    multiple of 4 elements inside the buffer and sliced off, so TMA's alignment always holds.

    ``transpose`` is the compiled ``autocutlass.kernels.transpose`` function of ``x``'s rank (or
    None). It does the copy when the source it reads meets its requirements
    (``transpose_accepts``: fp32, strides other than the contiguous one multiples of 4 elements,
    16-byte-aligned base); otherwise, or without it, torch's ``copy_`` of a transposed view does
    (about a quarter of the copy bandwidth). The destination always meets them: a fresh buffer
    whose rows are padded to a multiple of 4. Both run on the current stream."""
    import torch

    k = x.shape[-1] if rows_contiguous_k else x.shape[-2]
    k_pad = -(-k // 4) * 4
    if rows_contiguous_k:  # A: (.., M, K), M contiguous -> row-major
        buf = torch.empty((*x.shape[:-1], k_pad), dtype=x.dtype, device=x.device)
        out = buf[..., :k]
        src = x.transpose(-1, -2)  # (.., K, M), M contiguous: out[.., m, k] = src[.., k, m]
        if transpose is not None and out.numel() > 0 and transpose_accepts(src):
            transpose(src, out)
        else:  # e.g. M not a multiple of 4: A's (K, M) rows are not 16-byte aligned
            out.copy_(x)
        return out
    # B: (.., K, N), N contiguous -> buffer (.., N, K_pad) row-major, returned as its (.., K, N) transpose
    buf = torch.empty((*x.shape[:-2], x.shape[-1], k_pad), dtype=x.dtype, device=x.device)
    out = buf[..., :k]  # out[.., n, k] = x[.., k, n]
    if transpose is not None and out.numel() > 0 and transpose_accepts(x):
        transpose(x, out)
    else:  # e.g. N not a multiple of 4: B's (K, N) rows are not 16-byte aligned
        out.copy_(x.transpose(-1, -2))
    return out.transpose(-1, -2)


class HopperGemmRunner:
    """GemmRunner for one (config, kernel class). See ``autocutlass.kernels.base`` for the
    calling convention. Operands of rank 2 and 3 are served by separately compiled functions.

    A ``swap_ab`` config runs the swapped problem on transposed views of the same tensors
    (A' = B^T, B' = A^T, D' = D^T, C' = C^T): no copies.

    tf32 kernel operands (after any swap) that the kernel cannot read in place (an N-major B, or
    an M-major A that TMA cannot load) are copied to K-major buffers on every call before the
    launch (``check.kernel_problem``): a memory-bound copy of
    that operand, on the current stream, by our transpose kernel (``k_major_copy``), fetched
    once per rank in ``prepare``."""

    def __init__(self, config: HopperGemmConfig, problem: GemmProblem, cache_dir: Path | None,
                 compiler: Any = get_compiled) -> None:  # fmt: skip
        """``compiler(config, problem, rank, cache_dir)``: the compiled function of a rank
        (``compile.get_compiled``; ``hopper_gemm_gated``'s for the gated kernel)."""
        self._compiler = compiler
        self.config = config
        self.user_problem = problem
        self.problem = kernel_problem(problem, config)
        self._swap = config.swap_ab
        self._scaled = problem.a_dtype is DType.E4M3
        # tf32 copies: where the kernel's operand (after any swap) is not the caller's layout.
        self._copy_a, self._copy_b = copied_operands(problem, config)
        self._cache_dir = cache_dir
        self._fns: dict[int, Any] = {}
        self._clusters: dict[int, int] = {}
        self._workspace = SplitKWorkspace() if config.split_k > 1 or config.stream_k else None
        self._slabs = config.split_k > 1 and config.split_mode is SplitMode.WORKSPACE
        self._reduce: dict[int, Any] = {}
        self._transpose: dict[int, Any] = {}
        self.prepare(3 if problem.l > 1 else 2)

    def poison_scratch(self) -> None:
        """Verification's hook: NaN in the split-K / stream-K partials (``SplitKWorkspace.poison``)."""
        if self._workspace is not None:
            self._workspace.poison()

    def prepare(self, rank: int) -> Any:
        fn = self._fns.get(rank)
        if fn is None:
            fn = self._compiler(self.config, self.user_problem, rank, self._cache_dir)
            self._fns[rank] = fn
            if self._slabs:
                p = self.problem
                self._reduce[rank] = get_reduce(
                    self.config.split_k, p.d_dtype, p.c_dtype if p.epilogue.with_c else None, p.epilogue.bias,
                    p.epilogue.activation, rank, self._cache_dir, transposed=self._swap,
                )
            if self._copy_a or self._copy_b:
                self._transpose[rank] = get_transpose(rank, self._cache_dir)
        return fn

    @property
    def swaps_operands(self) -> bool:
        """Whether the kernel runs the swapped problem (``swap_ab``): it reads A' = B^T, B' = A^T
        and writes D' = D^T (and C' = C^T)."""
        return self._swap

    def direct_launch(self, rank: int, device_index: int, m: int, n: int, l: int) -> tuple[Any, int, Any] | None:  # noqa: E741
        """``(fn, clusters, scratch)`` for launches of ``rank``-operand tensors on device
        ``device_index`` whose kernel output D' is ``l`` x ``m`` x ``n``, when such a launch needs
        nothing but the kernel's operands and, for serial split-K or stream-K, its scratch (not
        workspace split-K, whose reduce kernel runs after, not tf32 copies, not fp8 scales), else
        None. The caller then launches ``fn(a', b', d', c', bias, work, count, None, None, alpha,
        beta, clusters)`` itself with the kernel's views of its tensors (swapped when
        ``swaps_operands``) and ``work, count = scratch()`` (both None when ``scratch`` is None),
        as ``__call__`` would, minus its per-call checks, transposes and look-ups: the hit path's
        shortest launch (``ops.gemm.entries``)."""
        if self._copy_a or self._copy_b or self._scaled or self._slabs:
            return None
        if self._workspace is not None and m * n * l == 0:
            return None  # no tiles: __call__ returns without a launch
        fn = self._fns.get(rank) or self.prepare(rank)
        clusters = self._clusters.get(device_index)
        if clusters is None:
            clusters = max_active_clusters(max(device_index, 0), self.config.cluster_size)
            self._clusters[device_index] = clusters
        if self._workspace is None:
            return fn, clusters, None
        import torch

        slots = self._slots(m, n, l, clusters)
        partials, workspace, device = slots * self.config.tile_m * self.config.tile_n, self._workspace, torch.device(
            "cuda", device_index)  # fmt: skip
        return fn, clusters, lambda: workspace.get(device, partials, slots)

    def _slots(self, m: int, n: int, l: int, clusters: int) -> int:  # noqa: E741
        """Serial split-K's and stream-K's scratch slots (tiles and turnstiles) for an l x m x n D'."""
        return scratch_slots(self.config, m, n, l, clusters)

    def __call__(
        self,
        a: Any,
        b: Any,
        d: Any,
        *,
        c: Any | None = None,
        bias: Any | None = None,
        alpha: float = 1.0,
        beta: float = 0.0,
        scale_a: Any | None = None,
        scale_b: Any | None = None,
    ) -> None:
        fn = self._fns.get(a.dim()) or self.prepare(a.dim())
        if self._scaled and (scale_a is None or scale_b is None):
            raise ValueError("an fp8 (e4m3) GEMM needs scale_a and scale_b: float32 CUDA tensors of one element")
        if self._scaled:  # the kernel reads each as a (1,) vector; a 0-dim tensor is viewed as one
            scale_a = scale_a if scale_a.dim() == 1 else scale_a.reshape(1)
            scale_b = scale_b if scale_b.dim() == 1 else scale_b.reshape(1)
        if self._swap:
            # D^T = B^T A^T: transposed views, no copies; D^T and C^T are column-major.
            a, b, d = b.transpose(-1, -2), a.transpose(-1, -2), d.transpose(-1, -2)
            if c is not None:
                c = c.transpose(-1, -2)
        if self._copy_a:
            a = k_major_copy(a, rows_contiguous_k=True, transpose=self._transpose.get(a.dim()))
        if self._copy_b:
            b = k_major_copy(b, rows_contiguous_k=False, transpose=self._transpose.get(b.dim()))
        dev = d.get_device()
        clusters = self._clusters.get(dev)
        if clusters is None:
            clusters = max_active_clusters(max(dev, 0), self.config.cluster_size)
            self._clusters[dev] = clusters
        if self._workspace is None:
            fn(a, b, d, c, bias, None, None, scale_a, scale_b, alpha, beta, clusters)
            return
        cfg = self.config
        m, n = d.shape[-2], d.shape[-1]
        l = d.shape[0] if d.dim() == 3 else 1  # noqa: E741
        if self._slabs:
            # Workspace split-K: the GEMM writes S raw fp32 slabs (S, L, M, N_pad), then the
            # reduce kernel sums them in split order and runs the epilogue into D.
            if m * n * l == 0:
                return
            work, slabs = self._workspace.slabs(d.device, cfg.split_k, l, m, n)
            fn(a, b, d, c, bias, work, None, scale_a, scale_b, alpha, beta, clusters)  # C, bias: unused here
            self._reduce[d.dim()](slabs, d, c, bias, alpha, beta)
            return
        if cfg.stream_k and m * n * l == 0:
            return  # no tiles: the kernel's grid would be empty
        slots = self._slots(m, n, l, clusters)
        work, count = self._workspace.get(d.device, slots * cfg.tile_m * cfg.tile_n, slots)
        fn(a, b, d, c, bias, work, count, scale_a, scale_b, alpha, beta, clusters)
