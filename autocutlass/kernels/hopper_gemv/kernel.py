"""The decode GEMV kernel (CuTe DSL): D = act(alpha * A @ B + beta * C + bias) for a few rows of A.

A decode step multiplies a handful of token rows (M <= 16) by a weight of N rows and K columns:
the weight is read once from memory and nothing else is large, so the time is the weight's bytes
over the memory bandwidth plus the kernel's ramp. A tensor-core tile kernel spends most of each
tile on padding rows and has few output tiles to spread over the SMs when N is a few thousand
(32 CTAs of a 128-row tile for a 4096-row weight); this kernel gives every SM weight rows to stream
with CUDA-core FMAs instead, which keep up with the bandwidth at these M.

**Work split** (``GemvConfig``): a CTA of ``warps_n * warps_k`` warps owns ``rows * warps_n``
consecutive weight rows (output columns n). Warp (wn, wk) owns ``rows`` of them and, along K, the
8-element chunks ``c = wk * 32 + lane + j * 32 * warps_k`` (j = 0, 1, ...): each lane issues
``rows * unroll`` 16-byte weight loads per step (coalesced: a warp reads 512 contiguous bytes of
each row), the ``unroll * M`` 16-byte loads of A's matching chunks (A is small and stays in L1/L2),
and accumulates ``rows * m_tile`` fp32 dot products. Steps whose chunks are all inside K run
unpredicated; the last step zeroes the chunks past K. Then each accumulator is summed over the warp
with butterfly shuffles, lane 0 of each warp puts its sums into shared memory, and after one barrier
the CTA's threads add the ``warps_k`` partial sums of each (m, n) in order (deterministic), apply
the epilogue (``epilogue_math``: alpha, C, bias, activation) and store D.

**What it relies on** (``*``: declared in the compiled signature, so TVM-FFI refuses a call that
breaks it): A (M, K) with unit K stride*, B (K, N) with unit K stride* (``W.t()`` of a row-major
weight), both with 16-byte aligned bases* and row strides*, so K is a multiple of 8; D (M, N) with
unit N stride*; C (when compiled in) like D; bias (N,) contiguous*. M <= ``m_tile`` is the caller's
(``check``): rows past M are read clamped to row M - 1 and never stored. Rows past N are read
clamped to row N - 1 and never stored. Shapes are symbolic: one compile serves every (M <= m_tile,
N, K) of a class.
"""

from __future__ import annotations

import os

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")  # before the DSL's first import: compiling off-GPU

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute

from autocutlass.kernels.epilogue_math import epilogue_value
from autocutlass.kernels.hopper_gemv.plan import GemvPlan
from autocutlass.ops.gemm.problem import DType

VEC = 8
"""Elements per 16-byte chunk of A and B (bf16 / fp16)."""

CUTLASS_DTYPES = {DType.BF16: cutlass.BFloat16, DType.FP16: cutlass.Float16, DType.FP32: cutlass.Float32}


class GemvKernel:
    """Compile-time object for one ``GemvPlan``; see the module docstring."""

    def __init__(self, plan: GemvPlan) -> None:
        self.plan = plan
        cfg = plan.config
        self.mt = cfg.m_tile
        self.rows = cfg.rows
        self.wn = cfg.warps_n
        self.wk = cfg.warps_k
        self.unroll = cfg.unroll
        self.threads = cfg.threads
        self.acc_n = cfg.rows * cfg.m_tile
        self.ab_dtype = CUTLASS_DTYPES[plan.ab_dtype]
        self.d_dtype = CUTLASS_DTYPES[plan.d_dtype]

    @cute.jit
    def __call__(
        self,
        a: cute.Tensor,
        b: cute.Tensor,
        d: cute.Tensor,
        c: cute.Tensor | None,
        bias: cute.Tensor | None,
        work: cute.Tensor | None,
        count: cute.Tensor | None,
        scale_a: cute.Tensor | None,
        scale_b: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        # work, count, scales and clusters: hopper_gemm's calling convention (the hit path's direct
        # launch calls every GEMM runner alike); this kernel takes None / ignores them.
        per_cta = self.rows * self.wn
        blocks = cutlass.max((b.shape[1] + per_cta - 1) // per_cta, 1)
        self.kernel(a, b, d, c, bias, alpha, beta).launch(grid=[blocks, 1, 1], block=[self.threads, 1, 1],
                                                           stream=stream)  # fmt: skip

    @cute.kernel
    def kernel(
        self,
        mA: cute.Tensor,
        mB: cute.Tensor,
        mD: cute.Tensor,
        mC: cute.Tensor | None,
        mBias: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        lane = tidx % 32
        warp = tidx // 32
        wn = warp % self.wn
        wk = warp // self.wn
        m = mA.shape[0]
        n = mB.shape[1]
        chunks = mA.shape[1] // VEC

        allocator = cutlass.memory.SmemAllocator()
        sRed = allocator.allocate_tensor(cutlass.Float32, cute.make_layout(self.acc_n * self.wn * self.wk),
                                         byte_alignment=16)  # fmt: skip

        n0 = bidx * (self.rows * self.wn) + wn * self.rows
        b_rows = [mB[(None, cutlass.min(n0 + r, n - 1))] for r in range(self.rows)]
        a_rows = [mA[(cutlass.min(mi, m - 1), None)] for mi in range(self.mt)]
        acc = cute.make_rmem_tensor((self.acc_n,), cutlass.Float32)
        acc.fill(0.0)

        stride = 32 * self.wk  # chunks between a lane's consecutive chunks
        step = stride * self.unroll
        first = wk * 32 + lane
        full = chunks // step  # steps whose chunks are all inside K, for every lane
        for s in cutlass.range(full, unroll=1):
            self._step(a_rows, b_rows, acc, first + s * step, chunks, False)
        if full * step < chunks:
            self._step(a_rows, b_rows, acc, first + full * step, chunks, True)

        for i in cutlass.range_constexpr(self.acc_n):
            acc[i] = cute.arch.warp_reduction_sum(acc[i])
        if lane == 0:
            for i in cutlass.range_constexpr(self.acc_n):
                sRed[i + self.acc_n * (wn + self.wn * wk)] = acc[i]
        cute.arch.sync_threads()

        outputs = self.acc_n * self.wn
        for pas in cutlass.range_constexpr((outputs + self.threads - 1) // self.threads):
            t = tidx + pas * self.threads
            if t < outputs:
                i = t % self.acc_n
                owner = t // self.acc_n  # the warp column wn whose rows these are
                r = i // self.mt
                mi = i % self.mt
                col = bidx * (self.rows * self.wn) + owner * self.rows + r
                if mi < m and col < n:
                    total = sRed[i + self.acc_n * owner]
                    for k in cutlass.range_constexpr(1, self.wk):
                        total = total + sRed[i + self.acc_n * (owner + self.wn * k)]
                    c_val = None
                    if cutlass.const_expr(self.plan.with_c):
                        c_val = mC[(mi, col)]
                    b_val = None
                    if cutlass.const_expr(self.plan.bias):
                        b_val = mBias[col]
                    out = epilogue_value(total, alpha, beta, c_val, b_val, self.plan.activation)
                    mD[(mi, col)] = out.to(self.d_dtype)

    @cute.jit
    def _step(self, a_rows, b_rows, acc: cute.Tensor, first, chunks, predicated: cutlass.Constexpr[bool]) -> None:
        """One step: ``unroll`` chunks per lane starting at chunk ``first`` (every weight load is
        issued before the first FMA); ``predicated``: chunks at or past ``chunks`` count as zero."""
        stride = 32 * self.wk
        w = [[cute.make_rmem_tensor((VEC,), self.ab_dtype) for _ in range(self.unroll)] for _ in range(self.rows)]
        for r in cutlass.range_constexpr(self.rows):
            for u in cutlass.range_constexpr(self.unroll):
                c = first + u * stride
                if cutlass.const_expr(predicated):
                    w[r][u].fill(0.0)
                    if c < chunks:
                        cute.autovec_copy(cute.local_tile(b_rows[r], (VEC,), (c,)), w[r][u])
                else:
                    cute.autovec_copy(cute.local_tile(b_rows[r], (VEC,), (c,)), w[r][u])
        for u in cutlass.range_constexpr(self.unroll):
            c = first + u * stride
            xs = [cute.make_rmem_tensor((VEC,), cutlass.Float32) for _ in range(self.mt)]
            for mi in cutlass.range_constexpr(self.mt):
                xa = cute.make_rmem_tensor((VEC,), self.ab_dtype)
                if cutlass.const_expr(predicated):
                    xa.fill(0.0)
                    if c < chunks:
                        cute.autovec_copy(cute.local_tile(a_rows[mi], (VEC,), (c,)), xa)
                else:
                    cute.autovec_copy(cute.local_tile(a_rows[mi], (VEC,), (c,)), xa)
                xs[mi].store(xa.load().to(cutlass.Float32))
            for r in cutlass.range_constexpr(self.rows):
                wf = cute.make_rmem_tensor((VEC,), cutlass.Float32)
                wf.store(w[r][u].load().to(cutlass.Float32))
                for mi in cutlass.range_constexpr(self.mt):
                    s = acc[r * self.mt + mi]
                    for j in cutlass.range_constexpr(VEC):
                        s = s + wf[j] * xs[mi][j]
                    acc[r * self.mt + mi] = s


MMA_ROWS = 16
"""Weight rows per ``mma.sync.m16n8k16`` (its M); its N is 8 activation rows, its K 16."""
GROUP_K = 32
"""K elements per lane group step of the MMA kernel: a lane loads one 16-byte chunk per row."""


class GemvMmaKernel:
    """The tensor-core variant (``GemvConfig.kind == "mma"``): warp (wn, wk) computes its
    ``rows`` weight rows against all ``m_tile`` activation rows with ``mma.sync.m16n8k16``, the
    weight as the MMA's A (16 rows) and A's rows as its B (8 columns). K is read in groups of 32:
    lane l loads 8 consecutive elements (16 bytes) of weight rows l/4 and l/4 + 8 of each 16-row
    block and of activation row l/4, at k = 32 g + 8 (l % 4); the two MMAs of the group take
    elements 0-3 and 4-7 of those chunks. That assigns each lane's fragment slots (k = 2 (l % 4)
    + {0, 1, 8, 9} of an MMA) other k than the MMA's own numbering, but the same ones for the
    weight and the activations, and a sum over k does not depend on its order. Each warp's
    accumulators are its K share's dot products; the ``warps_k`` shares meet in shared memory as in
    ``GemvKernel``."""

    def __init__(self, plan: GemvPlan) -> None:
        self.plan = plan
        cfg = plan.config
        self.mt = cfg.m_tile
        self.nb = cfg.m_tile // 8  # MMA column blocks (8 activation rows each)
        self.rb = cfg.rows // MMA_ROWS  # MMA row blocks per warp
        self.rows = cfg.rows
        self.wn = cfg.warps_n
        self.wk = cfg.warps_k
        self.unroll = cfg.unroll
        self.threads = cfg.threads
        self.slots = self.rb * self.nb * 4  # accumulator registers per lane
        self.ab_dtype = CUTLASS_DTYPES[plan.ab_dtype]
        self.d_dtype = CUTLASS_DTYPES[plan.d_dtype]

    @cute.jit
    def __call__(
        self,
        a: cute.Tensor,
        b: cute.Tensor,
        d: cute.Tensor,
        c: cute.Tensor | None,
        bias: cute.Tensor | None,
        work: cute.Tensor | None,
        count: cute.Tensor | None,
        scale_a: cute.Tensor | None,
        scale_b: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        per_cta = self.rows * self.wn
        blocks = cutlass.max((b.shape[1] + per_cta - 1) // per_cta, 1)
        self.kernel(a, b, d, c, bias, alpha, beta).launch(grid=[blocks, 1, 1], block=[self.threads, 1, 1],
                                                           stream=stream)  # fmt: skip

    @cute.kernel
    def kernel(
        self,
        mA: cute.Tensor,
        mB: cute.Tensor,
        mD: cute.Tensor,
        mC: cute.Tensor | None,
        mBias: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        lane = tidx % 32
        warp = tidx // 32
        wn = warp % self.wn
        wk = warp // self.wn
        m = mA.shape[0]
        n = mB.shape[1]
        chunks = mA.shape[1] // VEC

        allocator = cutlass.memory.SmemAllocator()
        sRed = allocator.allocate_tensor(cutlass.Float32, cute.make_layout(self.slots * 32 * self.wn * self.wk),
                                         byte_alignment=16)  # fmt: skip

        atom = cute.make_mma_atom(cute.nvgpu.warp.MmaF16BF16Op(self.ab_dtype, cutlass.Float32, (16, 8, 16)))
        n0 = bidx * (self.rows * self.wn) + wn * self.rows + lane // 4
        # rows l/4 and l/4 + 8 of each 16-row block: w_rows[2 * rb] and w_rows[2 * rb + 1]
        w_rows = [mB[(None, cutlass.min(n0 + (j // 2) * MMA_ROWS + (j % 2) * 8, n - 1))] for j in range(2 * self.rb)]
        x_rows = [mA[(cutlass.min(nb * 8 + lane // 4, m - 1), None)] for nb in range(self.nb)]
        acc = [cute.make_rmem_tensor((4, 1, 1), cutlass.Float32) for _ in range(self.rb * self.nb)]
        for i in cutlass.range_constexpr(self.rb * self.nb):
            acc[i].fill(0.0)

        groups = chunks // 4  # whole 32-element groups of K
        step = self.wk * self.unroll  # groups per warp per step
        full = groups // step
        sub = lane % 4
        for s in cutlass.range(full, unroll=1):
            self._step(atom, w_rows, x_rows, acc, (wk + s * step) * 4 + sub, chunks, False)
        if full * step * 4 < chunks:
            self._step(atom, w_rows, x_rows, acc, (wk + full * step) * 4 + sub, chunks, True)

        base = self.slots * 32 * (wn + self.wn * wk)
        for i in cutlass.range_constexpr(self.rb * self.nb):
            for v in cutlass.range_constexpr(4):
                sRed[base + (i * 4 + v) * 32 + lane] = acc[i][v]
        cute.arch.sync_threads()

        outputs = self.slots * 32 * self.wn
        for pas in cutlass.range_constexpr((outputs + self.threads - 1) // self.threads):
            t = tidx + pas * self.threads
            if t < outputs:
                owner = t // (self.slots * 32)
                rest = t % (self.slots * 32)
                slot = rest // 32
                ln = rest % 32
                blk = slot // 4
                v = slot % 4
                rb = blk // self.nb
                nb = blk % self.nb
                col = bidx * (self.rows * self.wn) + owner * self.rows + rb * MMA_ROWS + ln // 4 + (v // 2) * 8
                mi = nb * 8 + (ln % 4) * 2 + v % 2
                if mi < m and col < n:
                    total = sRed[self.slots * 32 * owner + rest]
                    for k in cutlass.range_constexpr(1, self.wk):
                        total = total + sRed[self.slots * 32 * (owner + self.wn * k) + rest]
                    c_val = None
                    if cutlass.const_expr(self.plan.with_c):
                        c_val = mC[(mi, col)]
                    b_val = None
                    if cutlass.const_expr(self.plan.bias):
                        b_val = mBias[col]
                    out = epilogue_value(total, alpha, beta, c_val, b_val, self.plan.activation)
                    mD[(mi, col)] = out.to(self.d_dtype)

    @cute.jit
    def _load(self, row: cute.Tensor, c, chunks, predicated: cutlass.Constexpr[bool]) -> cute.Tensor:
        frag = cute.make_rmem_tensor((VEC,), self.ab_dtype)
        if cutlass.const_expr(predicated):
            frag.fill(0.0)
            if c < chunks:
                cute.autovec_copy(cute.local_tile(row, (VEC,), (c,)), frag)
        else:
            cute.autovec_copy(cute.local_tile(row, (VEC,), (c,)), frag)
        return frag

    @cute.jit
    def _step(self, atom, w_rows, x_rows, acc, first, chunks, predicated: cutlass.Constexpr[bool]) -> None:
        """``unroll`` groups of 32 K elements (this lane's chunk of each starts at chunk ``first``,
        the next ``4 * warps_k`` chunks on); every load is issued before the first MMA."""
        stride = 4 * self.wk
        w = [[self._load(w_rows[j], first + u * stride, chunks, predicated) for j in range(2 * self.rb)]
             for u in range(self.unroll)]  # fmt: skip
        x = [[self._load(x_rows[nb], first + u * stride, chunks, predicated) for nb in range(self.nb)]
             for u in range(self.unroll)]  # fmt: skip
        for u in cutlass.range_constexpr(self.unroll):
            for half in cutlass.range_constexpr(2):
                for rb in cutlass.range_constexpr(self.rb):
                    lo = w[u][2 * rb]
                    hi = w[u][2 * rb + 1]
                    fa = cute.make_rmem_tensor((8, 1, 1), self.ab_dtype)  # (values, M blocks, K blocks)
                    fa[0] = lo[4 * half]
                    fa[1] = lo[4 * half + 1]
                    fa[2] = hi[4 * half]
                    fa[3] = hi[4 * half + 1]
                    fa[4] = lo[4 * half + 2]
                    fa[5] = lo[4 * half + 3]
                    fa[6] = hi[4 * half + 2]
                    fa[7] = hi[4 * half + 3]
                    for nb in cutlass.range_constexpr(self.nb):
                        fb = cute.make_rmem_tensor((4, 1, 1), self.ab_dtype)
                        for q in cutlass.range_constexpr(4):
                            fb[q] = x[u][nb][4 * half + q]
                        cute.gemm(atom, acc[rb * self.nb + nb], fa, fb, acc[rb * self.nb + nb])
