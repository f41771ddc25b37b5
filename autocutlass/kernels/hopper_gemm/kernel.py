"""The sm_90a warp-specialised persistent GEMM, written in CuTe DSL.

Roles inside one CTA (block of 128 * (1 + consumers) threads):

* warpgroup 0, the *producer*: drops to a small register budget; one warp walks the CTA's
  tiles (persistent static scheduler: raster order + swizzle groups) and, per K block, issues
  TMA loads of A and B into a multi-stage shared-memory ring (``PipelineTmaAsync``), multicast
  across the cluster where the cluster has more than one CTA along the other dimension.
  The A loader is a separate method (``_load_a``) so that an im2col TMA loader can replace it.
* warpgroups 1.., the *consumers*: raise their register budget, run WGMMA (fp32 accumulators)
  over the ring, release stages as soon as their WGMMAs retire, then run the epilogue:
  ``D = act(alpha * acc + beta * C + bias)`` applied in registers (``_epilogue_math``),
  converted to D's dtype, staged in shared memory with ``stmatrix`` and stored by TMA (or stored
  straight from registers: ``Store.DIRECT``).

  COOPERATIVE: the consumers split each tile along M and share the epilogue.
  PINGPONG: two consumers take alternate tiles of the CTA's sequence; each skips the other's
  K blocks in the ring and runs its own epilogue while the other computes.

Split-K (``split_k`` > 1) walks (tile, split) work units. SERIAL: the splits of a tile meet at a
turnstile in global memory and the last one runs the epilogue (``_reduce_splits``). WORKSPACE:
each split stores its raw fp32 partial to its own slab and a second kernel (``reduce``) sums
the slabs and runs the epilogue. STREAM-K (``stream_k``): the clusters of the grid share all
(tile, K block) iterations evenly (``_stream_unit``); a tile cut between clusters is finished
by the cluster that ran its first K block, which adds the others' partials (``_stream_fixup``).

Operands: bf16 / fp16 (any major), tf32 (fp32 bits: ``wgmma_tf32``; B K-major, A K-major in
shared memory or M-major through registers, ``_mma_stage_a_regs``; the runner copies other
layouts to K-major first), or fp8 e4m3 (K-major only; the accumulator is scaled by
two per-tensor scales read from device memory, folded into alpha). D and C are row-major, or column-major when the plan runs
the swapped problem D^T = B^T A^T (``swap_ab``: decode GEMMs put the weight's rows on WGMMA's
64-row side); the stmatrix staging, the TMA store and the bias index follow.

Shapes are symbolic: one compiled kernel serves every M, N, K, L of its class. TMA zero-fills
out-of-bounds loads and clips out-of-bounds stores, which handles every residue; the epilogue
reads C and bias at coordinates clamped into the matrix, and the direct stores are predicated.
"""

from __future__ import annotations

from typing import Optional

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait

from autocutlass.kernels.epilogue_math import activation
from autocutlass.kernels.budgets import PRODUCER_REGS, SMEM_BUFFER_ALIGN, THREADS_PER_WARPGROUP
from autocutlass.kernels.hopper_gemm.plan import Plan
from autocutlass.kernels.hopper_gemm.wgmma_tf32 import make_tf32_tiled_mma
from autocutlass.ops.gemm.problem import DType

CUTLASS_DTYPES = {
    DType.BF16: cutlass.BFloat16,
    DType.FP16: cutlass.Float16,
    DType.FP32: cutlass.Float32,
    DType.TF32: cutlass.Float32,  # fp32 in memory; the MMA reads it as tf32
    DType.E4M3: cutlass.Float8E4M3FN,
}


def _to_mkl(t: cute.Tensor, order: tuple[int, int, int]) -> cute.Tensor:
    """View a torch-ordered tensor (rank 2 or 3) as CuTe's (rows, cols, L)."""
    if cutlass.const_expr(cute.rank(t) == 2):
        lay = cute.append(t.layout, cute.make_layout(1))
        lay = cute.select(lay, mode=[order[0] - 1, order[1] - 1, 2])
        return cute.make_tensor(t.iterator, lay)
    return cute.make_tensor(t.iterator, cute.select(t.layout, mode=list(order)))


class HopperGemmKernel:
    """Compile-time object: all attributes derive from the frozen ``Plan``."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.tile_mnk = (plan.tile_m, plan.tile_n, plan.tile_k)
        self.cluster_mn = (plan.cluster_m, plan.cluster_n)
        self.num_consumers = plan.num_consumer_wgs
        self.threads = plan.threads
        self.epi_tile = (plan.epi_m, plan.epi_n)
        # Threads that share one epilogue (and one named barrier).
        self.epi_threads = THREADS_PER_WARPGROUP * (1 if plan.epi_groups == 2 else plan.num_consumer_wgs)
        # Consumers that read each ring stage (ping-pong: one).
        self.readers_per_stage = 1 if plan.pingpong else plan.num_consumer_wgs
        self.a_mcast = plan.cluster_n > 1
        self.b_mcast = plan.cluster_m > 1

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(
        self,
        a: cute.Tensor,
        b: cute.Tensor,
        d: cute.Tensor,
        c: Optional[cute.Tensor],
        bias: Optional[cute.Tensor],
        workspace: Optional[cute.Tensor],
        counters: Optional[cute.Tensor],
        scale_a: Optional[cute.Tensor],
        scale_b: Optional[cute.Tensor],
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        max_active_clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        # torch order (L, M, K) / (L, K, N) / (L, M, N) -> CuTe (M, K, L) / (N, K, L) / (M, N, L)
        mA = _to_mkl(a, (1, 2, 0))
        mB = _to_mkl(b, (2, 1, 0))
        mD = _to_mkl(d, (1, 2, 0))
        mC = None
        if cutlass.const_expr(self.plan.with_c):
            mC = _to_mkl(c, (1, 2, 0))
        if cutlass.const_expr(self.plan.a_dtype is DType.TF32):
            # Same bits; typed tf32 so that TMA, shared memory and the MMA agree.
            mA = cute.make_tensor(cute.recast_ptr(mA.iterator, dtype=cutlass.TFloat32), mA.layout)
            mB = cute.make_tensor(cute.recast_ptr(mB.iterator, dtype=cutlass.TFloat32), mB.layout)

        self.a_dtype = mA.element_type
        self.b_dtype = mB.element_type
        self.d_dtype = mD.element_type
        self.acc_dtype = cutlass.Float32
        self.a_layout = utils.LayoutEnum.from_tensor(mA)
        self.b_layout = utils.LayoutEnum.from_tensor(mB)
        self.d_layout = utils.LayoutEnum.from_tensor(mD)

        if cutlass.const_expr(self.plan.a_dtype is DType.TF32):
            self.tiled_mma = make_tf32_tiled_mma(
                (self.plan.mma_atoms_m, 1, 1), self.plan.tile_n, a_from_regs=self.plan.a_regs
            )
        else:
            self.tiled_mma = self._tiled_mma((self.plan.mma_atoms_m, self.plan.mma_atoms_n, 1))
        self.cta_layout_mnk = cute.make_layout((*self.cluster_mn, 1))
        a_staged, b_staged, d_staged = self._smem_layouts()

        tma_a, tA = self._tma_load(mA, a_staged, (self.plan.tile_m, self.plan.tile_k), self.plan.cluster_n)
        tma_b, tB = self._tma_load(mB, b_staged, (self.plan.tile_n, self.plan.tile_k), self.plan.cluster_m)
        d_one = cute.slice_(d_staged, (None, None, 0))
        tma_d, tD = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), mD, d_one, self.epi_tile
        )

        gD = cute.zipped_divide(mD, tiler=(self.plan.tile_m, self.plan.tile_n))
        tiles_mnl = gD[(0, (None, None, None))].shape
        # Split-K: the scheduler walks (tile_m, tile_n, L * split_k) work units; unit (m, n, u)
        # is split u % split_k of output tile (m, n, u // split_k).
        units_mnl = (tiles_mnl[0], tiles_mnl[1], tiles_mnl[2] * self.plan.split_k)
        sched_params = utils.PersistentTileSchedulerParams(
            units_mnl, (*self.cluster_mn, 1), self.plan.swizzle, self.plan.raster_along_m
        )
        if cutlass.const_expr(self.plan.stream_k):
            # Stream-K: one cluster per resident cluster slot, but never more than iterations.
            k_iters = cutlass.max((mA.shape[1] + self.plan.tile_k - 1) // self.plan.tile_k, 1)
            total = (
                (tiles_mnl[0] + self.plan.cluster_m - 1) // self.plan.cluster_m
                * ((tiles_mnl[1] + self.plan.cluster_n - 1) // self.plan.cluster_n)
                * tiles_mnl[2] * k_iters
            )
            grid = (*self.cluster_mn, cutlass.max(cutlass.min(max_active_clusters, total), 1))
        else:
            grid = utils.StaticPersistentTileScheduler.get_grid_shape(sched_params, max_active_clusters)

        if cutlass.const_expr(not self.plan.smem_epilogue):

            @cute.struct
            class SharedStorageDirect:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, self.plan.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorageDirect
        else:

            @cute.struct
            class SharedStorage:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, self.plan.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]
                sD: cute.struct.Align[cute.struct.MemRange[self.d_dtype, cute.cosize(d_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorage

        self.kernel(
            tma_a, tA, tma_b, tB, tma_d, tD, mD, mC, bias, workspace, counters, scale_a, scale_b, alpha, beta,
            self.tiled_mma, self.cta_layout_mnk, a_staged, b_staged, d_staged, sched_params,
        ).launch(
            grid=grid,
            block=[self.threads, 1, 1],
            cluster=(*self.cluster_mn, 1),
            min_blocks_per_mp=1,
            stream=stream,
        )

    def _tiled_mma(self, atom_layout_mnk):
        """The 16-bit / fp8 WGMMA tiled over ``atom_layout_mnk`` warpgroups, each atom
        ``plan.wg_tile_n`` columns wide."""
        return sm90_utils.make_trivial_tiled_mma(
            self.a_dtype,
            self.b_dtype,
            self.a_layout.sm90_mma_major_mode(),
            self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype,
            atom_layout_mnk,
            tiler_mn=(64, self.plan.wg_tile_n),
        )

    def _smem_layouts(self):
        p = self.plan
        a_kmajor = self.a_layout.sm90_mma_major_mode() == cute.nvgpu.warpgroup.OperandMajorMode.K
        b_kmajor = self.b_layout.sm90_mma_major_mode() == cute.nvgpu.warpgroup.OperandMajorMode.K
        a_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.a_layout, self.a_dtype, p.tile_k if a_kmajor else p.tile_m),
            self.a_dtype,
        )
        a_staged = cute.tile_to_shape(
            a_atom, (p.tile_m, p.tile_k, p.stages), order=(0, 1, 2) if a_kmajor else (1, 0, 2)
        )
        b_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.b_layout, self.b_dtype, p.tile_k if b_kmajor else p.tile_n),
            self.b_dtype,
        )
        b_staged = cute.tile_to_shape(
            b_atom, (p.tile_n, p.tile_k, p.stages), order=(0, 1, 2) if b_kmajor else (1, 0, 2)
        )
        # D is row-major, or column-major in the swapped problem: the staging buffer's swizzle
        # atom runs along D's contiguous dimension.
        d_m_major = self.d_layout.is_m_major_c()
        d_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.d_layout, self.d_dtype, p.epi_m if d_m_major else p.epi_n),
            self.d_dtype,
        )
        # Ping-pong and split along N: each consumer owns half of the staging buffers.
        epi_buffers = p.epi_stages * p.epi_groups
        d_staged = cute.tile_to_shape(
            d_atom, (p.epi_m, p.epi_n, epi_buffers), order=(1, 0, 2) if d_m_major else (0, 1, 2)
        )
        return a_staged, b_staged, d_staged

    @staticmethod
    def _tma_load(tensor, staged, tile, mcast):
        op = (
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
            if mcast == 1
            else cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp()
        )
        return cute.nvgpu.cpasync.make_tiled_tma_atom(
            op, tensor, cute.slice_(staged, (None, None, 0)), tile, num_multicast=mcast
        )

    # ------------------------------------------------------------------ device side
    @cute.kernel
    def kernel(
        self,
        tma_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_b: cute.CopyAtom,
        mB: cute.Tensor,
        tma_d: cute.CopyAtom,
        mD_tma: cute.Tensor,
        mD: cute.Tensor,
        mC: Optional[cute.Tensor],
        mBias: Optional[cute.Tensor],
        mWork: Optional[cute.Tensor],
        mCount: Optional[cute.Tensor],
        mScaleA: Optional[cute.Tensor],
        mScaleB: Optional[cute.Tensor],
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        tiled_mma: cute.TiledMma,
        cta_layout_mnk: cute.Layout,
        a_staged: cute.ComposedLayout,
        b_staged: cute.ComposedLayout,
        d_staged: cute.ComposedLayout,
        sched_params: utils.PersistentTileSchedulerParams,
    ):
        p = self.plan
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg_idx = cute.arch.make_warp_uniform(tidx // THREADS_PER_WARPGROUP)

        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_d)

        cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cluster_coord = cta_layout_mnk.get_flat_coord(cta_rank)
        a_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord, mode=1) if self.a_mcast else 0
        b_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord, mode=0) if self.b_mcast else 0

        tx_bytes = cute.size_in_bytes(self.a_dtype, cute.slice_(a_staged, (None, None, 0))) + cute.size_in_bytes(
            self.b_dtype, cute.slice_(b_staged, (None, None, 0))
        )

        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(self.shared_storage)

        mcast_peers = p.cluster_m + p.cluster_n - 1
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.ring_barriers.data_ptr(),
            num_stages=p.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, mcast_peers * self.readers_per_stage * 4
            ),
            tx_count=tx_bytes,
            cta_layout_vmnk=cute.make_layout((1, *cta_layout_mnk.shape)),
            defer_sync=True,
        )
        if cutlass.const_expr(p.pingpong):
            # Math-order barriers: consumer g waits on barrier g before its mainloop and, after it,
            # arrives on the other's. Mainloops then run strictly alternately, so no consumer ever
            # waits on a ring stage more than one fill ahead of the producer (mbarrier parity waits
            # cannot tell fills two apart).
            if tidx == 0:
                order = storage.order_barriers.data_ptr()
                cute.arch.mbarrier_init(order, THREADS_PER_WARPGROUP)
                cute.arch.mbarrier_init(order + 1, THREADS_PER_WARPGROUP)
            cute.arch.mbarrier_init_fence()
        pipeline_init_arrive(cluster_shape_mn=self.cluster_mn, is_relaxed=True)

        sA = storage.sA.get_tensor(a_staged.outer, swizzle=a_staged.inner)
        sB = storage.sB.get_tensor(b_staged.outer, swizzle=b_staged.inner)

        # (bM, bK, RestM, RestK, L) and (bN, bK, RestN, RestK, L)
        gA = cute.local_tile(mA, (p.tile_m, p.tile_k), (None, None, None))
        gB = cute.local_tile(mB, (p.tile_n, p.tile_k), (None, None, None))
        k_tiles = cute.size(gA, mode=[3])
        geom = None
        if cutlass.const_expr(p.stream_k):
            geom = self._stream_geometry(
                cute.size(gA, mode=[2]), cute.size(gB, mode=[2]), cute.size(gA, mode=[4]), k_tiles
            )

        pipeline_init_wait(cluster_shape_mn=self.cluster_mn)

        if wg_idx == 0:
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if warp_idx == 0:
                self._producer(
                    ring, tma_a, tma_b, sA, sB, gA, gB, k_tiles, a_mask, b_mask,
                    cta_layout_mnk, cluster_coord, sched_params, geom,
                )
        else:
            cute.arch.setmaxregister_increase(p.consumer_regs)
            if cutlass.const_expr(p.scaled):
                # fp8: the per-tensor scales fold into alpha, read once per thread from global memory.
                alpha = alpha * mScaleA[0] * mScaleB[0]
            self._consumer(
                ring, tiled_mma, sA, sB, k_tiles, storage, d_staged, tma_d, mD_tma, mD, mC, mBias,
                mWork, mCount, alpha, beta, tidx, warp_idx, wg_idx, sched_params, geom, cluster_coord, cta_rank,
            )

    # ------------------------------------------------------------------ split-K
    @cute.jit
    def _split_range(self, unit, k_tiles):
        """(batch index, first K tile, number of K tiles) of work unit ``unit``. Interleaved
        splits (``plan.split_interleave``): split s's K tiles are s, s + S, ... (``_k_tile``)."""
        split_k = self.plan.split_k
        if cutlass.const_expr(split_k == 1):
            return unit[2], cutlass.Int32(0), k_tiles
        split = unit[2] % split_k
        if cutlass.const_expr(self.plan.split_interleave):
            return unit[2] // split_k, split, cutlass.max((k_tiles - split + split_k - 1) // split_k, 0)
        per = (k_tiles + split_k - 1) // split_k
        kt0 = split * per
        return unit[2] // split_k, kt0, cutlass.max(cutlass.min(per, k_tiles - kt0), 0)

    @cute.jit
    def _k_tile(self, kt0, kt):
        """The K tile of a work unit's ``kt``-th load (``kt0`` from ``_split_range``)."""
        if cutlass.const_expr(self.plan.split_interleave):
            return kt0 + kt * self.plan.split_k
        return kt0 + kt

    # ------------------------------------------------------------------ stream-K
    @cute.jit
    def _stream_geometry(self, tiles_m, tiles_n, tiles_l, k_tiles):
        """(cluster tiles along M, cluster tiles along N, K iterations per tile, base, extra):
        the grid's G clusters share ``total`` = cluster tiles (of every batch) x K iterations,
        cluster g taking ``base + 1`` of them if g < ``extra``, else ``base`` (``_stream_span``). K = 0 still counts one
        iteration per tile (it loads nothing), so that every tile runs its epilogue."""
        ctm = (tiles_m + self.plan.cluster_m - 1) // self.plan.cluster_m
        ctn = (tiles_n + self.plan.cluster_n - 1) // self.plan.cluster_n
        k_iters = cutlass.max(k_tiles, 1)
        total = ctm * ctn * tiles_l * k_iters
        clusters = cute.arch.grid_dim()[2]
        return ctm, ctn, k_iters, total // clusters, total % clusters

    @cute.jit
    def _stream_span(self, geom, cluster):
        """[start, end) of cluster ``cluster``'s iterations."""
        base, extra = geom[3], geom[4]
        start = cluster * base + cutlass.min(cluster, extra)
        return start, (cluster + 1) * base + cutlass.min(cluster + 1, extra)

    @cute.jit
    def _stream_owner(self, geom, it):
        """The cluster whose span holds iteration ``it``, and the end of that span."""
        base, extra = geom[3], geom[4]
        cut = extra * (base + 1)
        owner = cutlass.Int32(0)
        if it < cut:
            owner = it // (base + 1)
        else:
            owner = extra + (it - cut) // base
        _, end = self._stream_span(geom, owner)
        return owner, end

    @cute.jit
    def _stream_unit(self, geom, it, end, cluster_coord):
        """The segment that starts at iteration ``it`` of a span ending at ``end``: this CTA's
        output tile (m, n, l) (cluster tiles in raster order, the CTA's place in the cluster
        inside), its first K block and its number of iterations (to the tile's end or the span's)."""
        ctm, ctn, k_iters = geom[0], geom[1], geom[2]
        lin = it // k_iters
        kt0 = it - lin * k_iters
        count = cutlass.min(k_iters - kt0, end - it)
        if cutlass.const_expr(self.plan.raster_along_m):
            cm_i = lin % ctm
            rest = lin // ctm
            cn_i = rest % ctn
            l_idx = rest // ctn
        else:
            cn_i = lin % ctn
            rest = lin // ctn
            cm_i = rest % ctm
            l_idx = rest // ctm
        tile = (cm_i * self.plan.cluster_m + cluster_coord[0], cn_i * self.plan.cluster_n + cluster_coord[1], l_idx)
        return tile, kt0, count

    @cute.jit
    def _stream_fixup(self, acc, mWork, mCount, it, kt0, count, geom, cta_rank, group_tidx, epi_barrier):
        """Stream-K partial tiles; returns whether this segment runs the tile's epilogue.

        A segment that starts past the tile's first K block is its cluster's first segment (a
        cluster's later segments start tiles), so each CTA leaves at most one partial: it stores
        it (fp32, in accumulator-fragment order) in its own workspace slot and raises its flag.
        The segment that starts the tile finishes it: for each later cluster that worked on the
        tile, in K order, it waits for that cluster's flag (same rank in the cluster), lowers it
        for the next launch and adds the partial. Clusters run their first segment first and it
        never waits, so no finisher waits on a cluster that waits; the sum's order is fixed, so
        the result is bitwise deterministic."""
        cluster_ctas = self.plan.cluster_m * self.plan.cluster_n
        n_acc = cute.size(acc)
        slot_elems = n_acc * self.epi_threads
        finishes = kt0 == 0
        if kt0 > 0:
            own = cute.arch.block_idx()[2] * cluster_ctas + cta_rank
            base = own * slot_elems + group_tidx
            for i in cutlass.range_constexpr(n_acc):
                mWork[base + i * self.epi_threads] = acc[i]
            cute.arch.fence_acq_rel_gpu()
            epi_barrier.arrive_and_wait()
            if group_tidx == 0:
                cute.arch.store(mCount.iterator + own, cutlass.Int32(1), sem="release", scope="gpu")
        else:
            nxt = it + count
            tile_end = it + geom[2]
            while nxt < tile_end:
                owner, owner_end = self._stream_owner(geom, nxt)
                slot = owner * cluster_ctas + cta_rank
                if group_tidx == 0:
                    flag = mCount.iterator + slot
                    seen = cute.arch.load(flag, cutlass.Int32, sem="acquire", scope="gpu")
                    while seen != 1:
                        seen = cute.arch.load(flag, cutlass.Int32, sem="acquire", scope="gpu")
                    cute.arch.store(flag, cutlass.Int32(0))
                epi_barrier.arrive_and_wait()
                cute.arch.fence_acq_rel_gpu()
                base = slot * slot_elems + group_tidx
                for i in cutlass.range_constexpr(n_acc):
                    acc[i] = acc[i] + mWork[base + i * self.epi_threads]
                nxt = owner_end
        return finishes

    # ------------------------------------------------------------------ producer
    @cute.jit
    def _load_a(self, tma_a, tAgA_k, tAsA_stage, barrier, a_mask):
        """Load one A stage. The swap point for other A loaders (im2col for convolution)."""
        cute.copy(tma_a, tAgA_k, tAsA_stage, tma_bar_ptr=barrier, mcast_mask=a_mask)

    @cute.jit
    def _producer(self, ring, tma_a, tma_b, sA, sB, gA, gB, k_tiles, a_mask, b_mask,
                  cta_layout_mnk, cluster_coord, sched_params, geom):
        a_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (0, None, 0)).shape)
        tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
            tma_a, cluster_coord[1], a_cta_layout, cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2)
        )
        b_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (None, 0, 0)).shape)
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
            tma_b, cluster_coord[0], b_cta_layout, cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2)
        )
        sched = utils.StaticPersistentTileScheduler.create(
            sched_params, cute.arch.block_idx(), cute.arch.grid_dim()
        )
        work = sched.initial_work_tile_info()
        it, end = cutlass.Int32(0), cutlass.Int32(0)
        valid = work.is_valid_tile
        if cutlass.const_expr(self.plan.stream_k):
            it, end = self._stream_span(geom, cute.arch.block_idx()[2])
            valid = it < end
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.plan.stages)
        while valid:
            if cutlass.const_expr(self.plan.stream_k):
                tile, kt0, count = self._stream_unit(geom, it, end, cluster_coord)
                l_idx = tile[2]
                kt_count = cutlass.max(cutlass.min(count, k_tiles - kt0), 0)
            else:
                tile = work.tile_idx
                l_idx, kt0, kt_count = self._split_range(tile, k_tiles)
            tAgA_t = tAgA[(None, tile[0], None, l_idx)]
            tBgB_t = tBgB[(None, tile[1], None, l_idx)]
            for kt in range(kt_count):
                ring.producer_acquire(state)
                barrier = ring.producer_get_barrier(state)
                kb = self._k_tile(kt0, kt)
                self._load_a(tma_a, tAgA_t[(None, kb)], tAsA[(None, state.index)], barrier, a_mask)
                cute.copy(tma_b, tBgB_t[(None, kb)], tBsB[(None, state.index)], tma_bar_ptr=barrier,
                          mcast_mask=b_mask)
                ring.producer_commit(state)
                state.advance()
            if cutlass.const_expr(self.plan.stream_k):
                it = it + count
                valid = it < end
            else:
                sched.advance_to_next_work()
                work = sched.get_current_work()
                valid = work.is_valid_tile
        ring.producer_tail(state)

    # ------------------------------------------------------------------ consumers
    @cute.jit
    def _consumer(self, ring, tiled_mma, sA, sB, k_tiles, storage, d_staged, tma_d, mD_tma, mD, mC, mBias,
                  mWork, mCount, alpha, beta, tidx, warp_idx, wg_idx, sched_params, geom, cluster_coord, cta_rank):
        p = self.plan
        consumer_idx = wg_idx - 1
        # Thread index inside the epilogue group, the MMA slice, the group's store warp; the
        # thread's index in the tiled MMA (``mma_tidx``: which accumulator elements it holds).
        if cutlass.const_expr(p.pingpong):
            group_tidx = tidx % THREADS_PER_WARPGROUP
            mma_slice = 0
            mma_tidx = group_tidx
            store_warp = wg_idx * 4
            group = consumer_idx
        elif cutlass.const_expr(p.n_split):
            # Split along N: the tiled MMA spans both consumers (each its half of B); each runs
            # the epilogue of its half on its own, as a ping-pong consumer does.
            group_tidx = tidx % THREADS_PER_WARPGROUP
            mma_slice = consumer_idx * THREADS_PER_WARPGROUP
            mma_tidx = tidx - THREADS_PER_WARPGROUP
            store_warp = wg_idx * 4
            group = consumer_idx
        else:
            group_tidx = tidx - THREADS_PER_WARPGROUP
            mma_slice = consumer_idx * THREADS_PER_WARPGROUP
            mma_tidx = group_tidx
            store_warp = 4
            group = 0
        epi_barrier = pipeline.NamedBarrier(barrier_id=1 + group, num_threads=self.epi_threads)
        order = storage.order_barriers.data_ptr()
        order_phase = 1 - consumer_idx

        # The warpgroup's slice partitions the shared-memory operands (WGMMA reads them per
        # warpgroup); the thread's own slice says which output element each register holds.
        thr_mma = tiled_mma.get_slice(mma_slice)
        thr_mma_c = tiled_mma.get_slice(mma_tidx)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
        k_blocks = cute.size(tCrB, mode=[2])
        tS2R_sA = None
        tS2R_rA = None
        s2r_a = None
        if cutlass.const_expr(p.a_regs):
            # A through registers (M-major tf32 A): the thread's own slice of the MMA says which A
            # elements its WGMMA fragment holds; a tiled copy of that layout loads them from the
            # ring stage, one K block (8 columns) at a time.
            thr_a = tiled_mma.get_slice(group_tidx)
            tCrA = tiled_mma.make_fragment_A(thr_a.partition_A(sA)[(None, None, None, 0)])
            s2r_a = cute.make_tiled_copy_A(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.a_dtype), tiled_mma)
            thr_s2r = s2r_a.get_slice(group_tidx)
            tS2R_sA = thr_s2r.partition_S(sA)
            tS2R_rA = thr_s2r.retile(tCrA)
        else:
            tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))

        gD = cute.local_tile(mD_tma, (p.tile_m, p.tile_n), (None, None, None))
        acc_shape = thr_mma.partition_C(gD).shape[:3]
        # The tiles the epilogue stores: the whole tile, or one consumer's half when split along N.
        gD_epi = gD
        if cutlass.const_expr(p.n_split):
            gD_epi = cute.local_tile(mD_tma, (p.tile_m, p.wg_tile_n), (None, None, None))
        acc = cute.make_rmem_tensor(acc_shape, self.acc_dtype)
        # Output coordinates of every accumulator element, for predicated C / bias loads.
        cD = cute.local_tile(cute.make_identity_tensor(mD.shape), (p.tile_m, p.tile_n), (None, None, None))

        if cutlass.const_expr(p.smem_epilogue):
            # Epilogue staging buffers; this group uses [group * epi_stages, (group + 1) * epi_stages).
            sD = storage.sD.get_tensor(d_staged.outer, swizzle=d_staged.inner)
            r2s_atom = sm90_utils.sm90_get_smem_store_op(
                self.d_layout, elem_ty_d=self.d_dtype, elem_ty_acc=self.acc_dtype
            )
            stm_atom = cute.make_copy_atom(
                cute.nvgpu.warp.StMatrix8x8x16bOp(self.d_layout.is_m_major_c(), 4), self.d_dtype
            )
            # The stmatrix copy partitions one epilogue group's share: the whole tile, or (split
            # along N) one consumer's half, laid out as a one-warpgroup MMA's accumulator.
            epi_mma = tiled_mma
            if cutlass.const_expr(p.n_split):
                epi_mma = self._tiled_mma((1, 1, 1))
            r2s = cute.make_tiled_copy_S(r2s_atom, cute.make_tiled_copy_C_atom(stm_atom, epi_mma))
            thr_r2s = r2s.get_slice(group_tidx)
            tRS_sD = thr_r2s.partition_D(sD)
            tRS_acc = r2s.retile(acc)
            chunk_shape = cute.shape(thr_r2s.partition_S(sD))[:3]
            tRS_chunk = cute.make_rmem_tensor(chunk_shape, self.acc_dtype)
            tRS_out = cute.make_rmem_tensor(chunk_shape, self.d_dtype)
            chunk_size = cute.size(tRS_chunk)

        sched = utils.StaticPersistentTileScheduler.create(sched_params, cute.arch.block_idx(), cute.arch.grid_dim())
        work = sched.initial_work_tile_info()
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, p.stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, p.stages)
        if cutlass.const_expr(p.pingpong):
            # Consumer i starts at the CTA's i-th tile and skips the K blocks of the tiles before.
            # Branch-free (a zero advance for consumer 0) so that the states stay loop-carried values.
            sched.advance_to_next_work(advance_count=consumer_idx)
            work = sched.get_current_work()
            read.advance(k_tiles * consumer_idx)
            release.advance(k_tiles * consumer_idx)

        it, end = cutlass.Int32(0), cutlass.Int32(0)
        valid = work.is_valid_tile
        if cutlass.const_expr(p.stream_k):
            it, end = self._stream_span(geom, cute.arch.block_idx()[2])
            valid = it < end
        tiles_done = cutlass.Int32(0)
        while valid:
            if cutlass.const_expr(p.stream_k):
                tile, kt0, count = self._stream_unit(geom, it, end, cluster_coord)
                kt_count = cutlass.max(cutlass.min(count, k_tiles - kt0), 0)
                unit = tile
            else:
                unit = work.tile_idx
                l_idx, kt0, kt_count = self._split_range(unit, k_tiles)
                tile = (unit[0], unit[1], l_idx)
            # ---- mainloop: WGMMA over the ring, one WGMMA batch in flight
            if cutlass.const_expr(p.pingpong):
                cute.arch.mbarrier_wait(order + consumer_idx, order_phase)
                order_phase = order_phase ^ 1
            acc.fill(0.0)
            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
            cute.nvgpu.warpgroup.fence()
            for kt in range(kt_count):
                ring.consumer_wait(read)
                if cutlass.const_expr(p.a_regs):
                    self._mma_stage_a_regs(tiled_mma, acc, tCrA, tCrB, s2r_a, tS2R_sA, tS2R_rA, k_blocks, read.index)
                else:
                    for kb in cutlass.range_constexpr(k_blocks):
                        coord = (None, None, kb, read.index)
                        cute.gemm(tiled_mma, acc, tCrA[coord], tCrB[coord], acc)
                    cute.nvgpu.warpgroup.commit_group()
                read.advance()
                if kt > 0:
                    if cutlass.const_expr(not p.a_regs):
                        # (a_regs: the stage's own waits have already retired the previous stage)
                        cute.nvgpu.warpgroup.wait_group(1)
                    ring.consumer_release(release)
                    release.advance()
            if cutlass.const_expr(p.pingpong):
                # Every stage of this tile has been waited on, so the other consumer may start
                # issuing while our last WGMMAs drain.
                cute.arch.mbarrier_arrive(order + (1 - consumer_idx))
            cute.nvgpu.warpgroup.wait_group(0)
            if kt_count > 0:
                ring.consumer_release(release)
                release.advance()
            if cutlass.const_expr(p.pingpong):
                # Skip the K blocks of the other consumer's next tile.
                read.advance(k_tiles)
                release.advance(k_tiles)

            tCcD = thr_mma_c.partition_C(cD[(None, None, tile[0], tile[1], tile[2])])
            if cutlass.const_expr(p.split_workspace):
                # ---- workspace split-K: the raw partial goes to slab (split, l); the reduce
                # kernel sums the slabs and runs the epilogue.
                mSlabs = self._workspace_slabs(mD, mWork)
                slab = (unit[2] % p.split_k) * mD.shape[2] + tile[2]
                self._store_fragment(acc, thr_mma_c, mSlabs, tCcD, (tile[0], tile[1], slab), mD.shape)
            else:
                is_last = True
                if cutlass.const_expr(p.split_k > 1):
                    is_last = self._reduce_splits(acc, mD, mWork, mCount, unit, group_tidx, epi_barrier)
                if cutlass.const_expr(p.stream_k):
                    is_last = self._stream_fixup(
                        acc, mWork, mCount, it, kt0, count, geom, cta_rank, group_tidx, epi_barrier
                    )

                if is_last:
                    # ---- epilogue math in registers
                    self._epilogue_math(acc, tCcD, mD, mC, mBias, alpha, beta)

                    if cutlass.const_expr(p.direct_store):
                        rD = cute.make_rmem_tensor(acc.shape, self.d_dtype)
                        rD.store(acc.load().to(self.d_dtype))
                        self._store_fragment(rD, thr_mma_c, mD, tCcD, tile, mD.shape)
                    else:
                        epi_tile = tile
                        if cutlass.const_expr(p.n_split):
                            epi_tile = (tile[0], tile[1] * 2 + group, tile[2])
                        self._store_tma(acc, tRS_acc, tRS_chunk, tRS_out, chunk_size, r2s, tRS_sD, sD, gD_epi,
                                        tma_d, epi_tile, tiles_done, group, warp_idx, store_warp, epi_barrier)
                    tiles_done += 1
            if cutlass.const_expr(p.stream_k):
                it = it + count
                valid = it < end
            else:
                if cutlass.const_expr(p.pingpong):
                    sched.advance_to_next_work(advance_count=2)
                else:
                    sched.advance_to_next_work()
                work = sched.get_current_work()
                valid = work.is_valid_tile

        if cutlass.const_expr(p.smem_epilogue):
            if warp_idx == store_warp:
                cute.arch.cp_async_bulk_wait_group(0, read=True)

    @cute.jit
    def _mma_stage_a_regs(self, tiled_mma, acc, tCrA, tCrB, s2r_a, tS2R_sA, tS2R_rA, k_blocks, stage):
        """One ring stage with A read from registers: per K block, load the fragment from shared
        memory, fence, issue the WGMMA and commit it as its own group. The fragment of K block kb
        is reused stage after stage, so before loading it we wait until at most k_blocks - 1
        groups are in flight: the previous stage's WGMMA of block kb has then retired. After the
        last block every WGMMA of the previous stage has retired, so its ring slot may be released."""
        for kb in cutlass.range_constexpr(k_blocks):
            cute.nvgpu.warpgroup.wait_group(k_blocks - 1)
            cute.copy(s2r_a, tS2R_sA[(None, None, kb, stage)], tS2R_rA[(None, None, kb)])
            cute.nvgpu.warpgroup.fence()
            cute.gemm(tiled_mma, acc, tCrA[(None, None, kb)], tCrB[(None, None, kb, stage)], acc)
            cute.nvgpu.warpgroup.commit_group()

    @cute.jit
    def _reduce_splits(self, acc, mD, mWork, mCount, unit, group_tidx, epi_barrier):
        """Serial split-K, in order and therefore bitwise deterministic: split s waits for the
        tile's turnstile to read s, adds the partial sum that splits 0..s-1 left in the workspace
        (fp32, in accumulator-fragment order, so that every thread reads what it wrote), and either
        writes the new partial and opens the turnstile for s+1, or, being the last split, resets
        the turnstile and returns True to run the epilogue."""
        p = self.plan
        split_k = p.split_k
        split = unit[2] % split_k
        # Tile counts padded to whole clusters: a cluster's CTAs past M or N still run the
        # protocol, in slots of their own.
        tiles_m = (mD.shape[0] + p.tile_m * p.cluster_m - 1) // (p.tile_m * p.cluster_m) * p.cluster_m
        tiles_n = (mD.shape[1] + p.tile_n * p.cluster_n - 1) // (p.tile_n * p.cluster_n) * p.cluster_n
        tile_lin = (unit[2] // split_k * tiles_n + unit[1]) * tiles_m + unit[0]
        flag = mCount.iterator + tile_lin
        n_acc = cute.size(acc)
        base = tile_lin * (n_acc * self.epi_threads) + group_tidx
        if split > 0:
            if group_tidx == 0:
                seen = cute.arch.load(flag, cutlass.Int32, sem="acquire", scope="gpu")
                while seen != split:
                    seen = cute.arch.load(flag, cutlass.Int32, sem="acquire", scope="gpu")
            epi_barrier.arrive_and_wait()
            cute.arch.fence_acq_rel_gpu()
            for i in cutlass.range_constexpr(n_acc):
                acc[i] = acc[i] + mWork[base + i * self.epi_threads]
        is_last = split == split_k - 1
        if is_last:
            if group_tidx == 0:
                cute.arch.store(flag, cutlass.Int32(0))
        else:
            for i in cutlass.range_constexpr(n_acc):
                mWork[base + i * self.epi_threads] = acc[i]
            cute.arch.fence_acq_rel_gpu()
            epi_barrier.arrive_and_wait()
            if group_tidx == 0:
                cute.arch.store(flag, split + 1, sem="release", scope="gpu")
        return is_last

    @cute.jit
    def _workspace_slabs(self, mD, mWork):
        """The workspace of workspace-mode split-K as (M, N, S * L): slab s * L + l holds split s
        of batch l, row-major with rows padded to a multiple of 4 elements (16 bytes), the layout
        of the torch tensor (S, L, M, N_pad) the runner allocates."""
        m, n, l = mD.shape
        n_pad = (n + 3) // 4 * 4
        layout = cute.make_layout((m, n, l * self.plan.split_k), stride=(n_pad, 1, m * n_pad))
        return cute.make_tensor(mWork.iterator, layout)

    @cute.jit
    def _store_fragment(self, frag, thr_mma_c, mDst, tCcD, tile, extent):
        """Registers -> global memory, no shared memory and no barriers: each thread stores its
        accumulator-shaped fragment (already in ``mDst``'s dtype; pairs of adjacent columns) with
        vector stores; tiles that cross M or N (``extent``) store element by element under a
        predicate. Serves the direct store of D and the partials of workspace split-K."""
        p = self.plan
        gDst = cute.local_tile(mDst, (p.tile_m, p.tile_n), (None, None, None))
        tCgD = thr_mma_c.partition_C(gDst[(None, None, tile[0], tile[1], tile[2])])
        last = (tile[0] * p.tile_m + p.tile_m - 1, tile[1] * p.tile_n + p.tile_n - 1)
        if cute.elem_less(last, (extent[0], extent[1])):
            cute.autovec_copy(frag, tCgD)
        else:
            for i in cutlass.range_constexpr(cute.size(frag)):
                crd = tCcD[i]
                if cute.elem_less((crd[0], crd[1]), (extent[0], extent[1])):
                    tCgD[i] = frag[i]

    @cute.jit
    def _store_tma(self, acc, tRS_acc, tRS_chunk, tRS_out, chunk_size, r2s, tRS_sD, sD, gD, tma_d,
                   tile, tiles_done, group, warp_idx, store_warp, epi_barrier):
        """Registers -> shared memory (stmatrix) -> global memory (TMA), column chunk by chunk."""
        p = self.plan
        gD_tile = gD[(None, None, *tile)]
        gD_epi = cute.zipped_divide(gD_tile, self.epi_tile)
        bSG_sD, bSG_gD = cute.nvgpu.cpasync.tma_partition(
            tma_d, 0, cute.make_layout(1), cute.group_modes(sD, 0, 2), gD_epi
        )
        n_chunks = cute.size(gD_epi, mode=[1])
        chunk_grid = gD_epi.shape[1]
        chunk_layout = cute.make_layout(chunk_grid, stride=(chunk_grid[1], 1))
        for ci in cutlass.range_constexpr(n_chunks):
            for v in cutlass.range_constexpr(chunk_size):
                tRS_chunk[v] = tRS_acc[ci * chunk_size + v]
            tRS_out.store(tRS_chunk.load().to(self.d_dtype))
            buf = (tiles_done * n_chunks + ci) % p.epi_stages + group * p.epi_stages
            cute.copy(r2s, tRS_out, tRS_sD[(None, None, None, buf)])
            cute.arch.fence_proxy("async.shared", space="cta")
            if warp_idx == store_warp:
                # The next chunk overwrites the buffer of the store issued epi_stages - 1 chunks
                # ago: before the barrier, let at most epi_stages - 2 stores still be reading.
                # One barrier per chunk then orders both hazards.
                cute.arch.cp_async_bulk_wait_group(p.epi_stages - 2, read=True)
            epi_barrier.arrive_and_wait()
            if warp_idx == store_warp:
                cute.copy(tma_d, bSG_sD[(None, buf)], bSG_gD[(None, chunk_layout.get_hier_coord(ci))])
                cute.arch.cp_async_bulk_commit_group()

    @cute.jit
    def _epilogue_math(self, acc, tCcD, mD, mC, mBias, alpha, beta):
        """acc <- act(alpha * acc + beta * C + bias), element by element, in registers.

        C and bias are read at the element's output coordinate clamped into the matrix: rows and
        columns past M / N read a valid neighbour instead of branching, and their results are
        dropped by the clipping TMA store.
        """
        p = self.plan
        m_last = mD.shape[0] - 1
        n_last = mD.shape[1] - 1
        for i in cutlass.range_constexpr(cute.size(acc)):
            x = acc[i] * alpha
            if cutlass.const_expr(p.with_c or p.bias):
                crd = tCcD[i]
                n_in = cutlass.min(crd[1], n_last)
                m_in = cutlass.min(crd[0], m_last)
                if cutlass.const_expr(p.with_c):
                    x = x + beta * mC[m_in, n_in, crd[2]].to(cutlass.Float32)
                if cutlass.const_expr(p.bias):
                    # One value per column of the caller's D: the kernel's rows when swapped.
                    if cutlass.const_expr(p.swap_ab):
                        x = x + mBias[m_in].to(cutlass.Float32)
                    else:
                        x = x + mBias[n_in].to(cutlass.Float32)
            x = self._activation(x)
            acc[i] = x

    @cute.jit
    def _activation(self, x):
        return activation(x, self.plan.activation)
