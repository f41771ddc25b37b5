"""The sm_90a persistent grouped GEMM of mixture-of-experts layers, written in CuTe DSL.

out[rows of expert g] = act(x[rows of expert g] @ w[g] + bias[g]) for every expert g, in one
launch whose tile scheduler reads ``offs`` on the device: a new routing never synchronises the
host, never recompiles, and a launch can be captured in a CUDA graph and replayed with other
routings.

**Set-up, per CTA** (``_build_tables``): every thread reads ``offs`` for a few groups and writes
each group's first row and row count to shared memory (offsets clamped into [0, T]: bad offsets
cannot address memory outside x or out); warp 0 then turns the row counts into running tile
totals (ceil(rows / tile_m) * ceil(N / tile_n) tiles per group), 32 groups per step with a warp
scan. Group E (one past the experts) is the *tail*: the rows past ``offs[-1]``, stored as zeros.

**Schedule**: cluster c takes the cluster tiles c, c + clusters, c + 2 * clusters, ... of the
linear order (groups in order; inside a group, row units first along M for ``raster`` ALONG_M,
else column tiles first); ``_locate`` maps a cluster tile to its group by a binary search of the
running totals, then to its row unit and column unit. A cluster tile is ``cluster_m`` adjacent
row tiles by ``cluster_n`` adjacent column tiles of one group (cluster 1x1: one tile); the
cluster's CTA at (r, c) holds row tile ``row unit * cluster_m + r`` and column tile
``column unit * cluster_n + c``. The producer warp and the consumer warpgroups walk the same
sequence independently.

**Clusters of two** share an operand tile: 2x1 (two row tiles of one column tile) the weight
tile, 1x2 (two column tiles of one row tile) the tokens' tile. Each CTA loads half of the shared
tile and multicasts it to both; each stage's barrier expects whole tiles, and a stage is
refilled only once the consumers of both CTAs released it (``PipelineTmaAsync`` over the
cluster). Where a group's row tiles (2x1) or the column tiles (1x2) are odd in number, the last
pair's second CTA holds nothing to store: it loads what follows (the next group's rows, zeros
past T or past N), computes and stores nothing, so that the pair stays in step.

**Producer** (one warp of warpgroup 0): per K block, one TMA load of the tile's ``tile_m`` rows of x
(one descriptor for all of x; the tile starts at the group's first row plus a multiple of
tile_m, so its last rows may belong to the next group or lie past T: they are loaded, multiplied
and never stored; rows past T arrive as zeros) and one of the expert's weight tile (w viewed as
(N, K, E): the expert is the TMA's third coordinate), into the GEMM family's shared-memory ring.

**Consumers**, cooperative (one warpgroup per 64 rows of each tile) or ping-pong (two warpgroups
taking the CTA's tiles in turn: each walks every tile of the sequence and skips the ring stages
of the other's, and two order barriers make their mainloops alternate, as in the GEMM kernel):
WGMMA over the ring as in the GEMM kernel, then the epilogue in registers: + bias[g], activation, conversion, and a store straight
from registers to global memory, vectorised for tiles whose rows all belong to the group and
whose columns are all inside N, element by element under a (row < rows of the group in this
tile, column < N) predicate otherwise. Tail tiles skip the mainloop and store zeros.

Tensors, in torch's order: x (T, K) K-contiguous, w (E, K, N) N- or K-contiguous, offs (E,)
int32, out (T, N) row-major, bias (E, N) row-major or None. T, K, N, E and every stride are
symbolic: one compiled kernel serves every shape and routing of its class.
"""

from __future__ import annotations

from typing import Optional

import cuda.bindings.driver as cuda
import cutlass
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import cute, pipeline, utils
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait

from autocutlass.kernels.budgets import (
    PRODUCER_REGS,
    SMEM_BUFFER_ALIGN,
    THREADS_PER_WARPGROUP,
)
from autocutlass.kernels.hopper_gemm.kernel import (
    CUTLASS_DTYPES,
    HopperGemmKernel,
    _to_mkl,
)
from autocutlass.kernels.hopper_grouped.plan import GroupedPlan

__all__ = ["CUTLASS_DTYPES", "HopperGroupedKernel"]

WARP = 32


class HopperGroupedKernel(HopperGemmKernel):
    """Compile-time object: every attribute derives from the frozen ``GroupedPlan``. Inherits the
    GEMM kernel's shared-memory layouts, TMA atoms and activation."""

    def __init__(self, plan: GroupedPlan) -> None:
        super().__init__(plan.gemm)
        self.grouped_plan = plan
        self.entries = plan.entries
        # Binary-search steps that narrow [0, entries) to one group.
        self.search_steps = (plan.entries - 1).bit_length()

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(
        self,
        x: cute.Tensor,
        w: cute.Tensor,
        offs: cute.Tensor,
        out: cute.Tensor,
        bias: Optional[cute.Tensor],
        max_active_clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        p = self.plan
        mA = _to_mkl(x, (1, 2, 0))  # (T, K, 1)
        mB = _to_mkl(w, (2, 1, 0))  # (N, K, E)

        self.a_dtype = mA.element_type
        self.b_dtype = mB.element_type
        self.d_dtype = out.element_type
        self.acc_dtype = cutlass.Float32
        self.a_layout = utils.LayoutEnum.from_tensor(mA)
        self.b_layout = utils.LayoutEnum.from_tensor(mB)
        self.d_layout = utils.LayoutEnum.ROW_MAJOR
        self.tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.a_dtype,
            self.b_dtype,
            self.a_layout.sm90_mma_major_mode(),
            self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype,
            (p.mma_atoms_m, 1, 1),
            tiler_mn=(64, p.tile_n),
        )
        cm, cn = p.cluster_m, p.cluster_n
        self.cta_layout_mnk = cute.make_layout((cm, cn, 1))
        a_staged, b_staged, d_staged = self._smem_layouts()
        tma_a, tA = self._tma_load(mA, a_staged, (p.tile_m, p.tile_k), cn)
        tma_b, tB = self._tma_load(mB, b_staged, (p.tile_n, p.tile_k), cm)
        # The TMA store of whole tiles (``store`` TMA): out as (T, N, 1), column chunks of epi_tile.
        tma_d, tD = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), _to_mkl(out, (1, 2, 0)),
            cute.slice_(d_staged, (None, None, 0)), self.epi_tile,
        )  # fmt: skip

        # At most ceil(T / (tile_m * cluster_m)) + E + 1 row units (one partial unit per group,
        # the tail's included) times the column units: no more clusters than that, nor than fit
        # at once. The grid is one-dimensional, cluster_m * cluster_n CTAs per cluster.
        n_units = (out.shape[1] + p.tile_n * cn - 1) // (p.tile_n * cn)
        bound = ((mA.shape[0] + p.tile_m * cm - 1) // (p.tile_m * cm) + offs.shape[0] + 1) * n_units
        grid = (cm * cn * cutlass.max(cutlass.min(max_active_clusters, bound), 1), 1, 1)

        entries = self.entries

        if cutlass.const_expr(not p.smem_epilogue):

            @cute.struct
            class SharedStorage:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, p.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                first_row: cute.struct.MemRange[cutlass.Int32, entries]
                row_count: cute.struct.MemRange[cutlass.Int32, entries]
                tile_end: cute.struct.MemRange[cutlass.Int32, entries]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorage
        else:

            @cute.struct
            class SharedStorageTma:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, p.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                first_row: cute.struct.MemRange[cutlass.Int32, entries]
                row_count: cute.struct.MemRange[cutlass.Int32, entries]
                tile_end: cute.struct.MemRange[cutlass.Int32, entries]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]
                sD: cute.struct.Align[cute.struct.MemRange[self.d_dtype, cute.cosize(d_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorageTma

        self.kernel(tma_a, tA, tma_b, tB, tma_d, tD, out, offs, bias, self.tiled_mma, a_staged, b_staged,
                    d_staged).launch(  # fmt: skip
            grid=grid,
            block=[self.threads, 1, 1],
            cluster=(cm * cn, 1, 1),
            min_blocks_per_mp=1,
            stream=stream,
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
        mOffs: cute.Tensor,
        mBias: Optional[cute.Tensor],
        tiled_mma: cute.TiledMma,
        a_staged: cute.ComposedLayout,
        b_staged: cute.ComposedLayout,
        d_staged: cute.ComposedLayout,
    ):
        p = self.plan
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg_idx = cute.arch.make_warp_uniform(tidx // THREADS_PER_WARPGROUP)

        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            if cutlass.const_expr(p.smem_epilogue):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_d)

        cm, cn = p.cluster_m, p.cluster_n
        # The CTA's place in its cluster: (row, column) = (rank, 0) for 2x1, (0, rank) for 1x2.
        rank_mn = (cutlass.Int32(0), cutlass.Int32(0))
        a_mask = 0
        b_mask = 0
        if cutlass.const_expr(cm * cn > 1):
            cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
            cta_layout = cute.make_layout((cm, cn, 1))
            coord = cta_layout.get_flat_coord(cta_rank)
            if cutlass.const_expr(cm > 1):
                rank_mn = (cta_rank, cutlass.Int32(0))
                b_mask = cute.make_layout_image_mask(cta_layout, coord, mode=0)
            else:
                rank_mn = (cutlass.Int32(0), cta_rank)
                a_mask = cute.make_layout_image_mask(cta_layout, coord, mode=1)

        # Every CTA's stage receives whole tiles (a shared one half from each CTA of a pair).
        tx_bytes = cute.size_in_bytes(self.a_dtype, cute.slice_(a_staged, (None, None, 0))) + cute.size_in_bytes(
            self.b_dtype, cute.slice_(b_staged, (None, None, 0))
        )
        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.ring_barriers.data_ptr(),
            num_stages=p.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            # A stage is refilled once its readers in every CTA that multicasts into it are done.
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, (cm + cn - 1) * self.readers_per_stage * 4),
            tx_count=tx_bytes,
            cta_layout_vmnk=cute.make_layout((1, cm, cn, 1)),
            defer_sync=True,
        )
        if cutlass.const_expr(p.pingpong):
            # Ping-pong order barriers: consumer c waits on barrier c before its mainloop and, once
            # it has waited on every stage of its tile, arrives on the other's.
            if tidx == 0:
                order = storage.order_barriers.data_ptr()
                cute.arch.mbarrier_init(order, THREADS_PER_WARPGROUP)
                cute.arch.mbarrier_init(order + 1, THREADS_PER_WARPGROUP)
            cute.arch.mbarrier_init_fence()
        pipeline_init_arrive(cluster_shape_mn=(cm, cn), is_relaxed=True)

        tables = (
            storage.first_row.get_tensor(cute.make_layout(self.entries)),
            storage.row_count.get_tensor(cute.make_layout(self.entries)),
            storage.tile_end.get_tensor(cute.make_layout(self.entries)),
        )
        experts = mOffs.shape[0]
        n_units = (mD.shape[1] + p.tile_n * cn - 1) // (p.tile_n * cn)  # column units
        self._build_tables(mOffs, mA.shape[0], n_units, tables, tidx, warp_idx)
        if cutlass.const_expr(cm * cn > 1):
            # The cluster wait below orders only what came before the arrive above: the tables
            # need a CTA barrier of their own.
            cute.arch.sync_threads()
        pipeline_init_wait(cluster_shape_mn=(cm, cn))  # (cluster 1: a CTA barrier, the tables complete)

        sA = storage.sA.get_tensor(a_staged.outer, swizzle=a_staged.inner)
        sB = storage.sB.get_tensor(b_staged.outer, swizzle=b_staged.inner)
        k_tiles = (mA.shape[1] + p.tile_k - 1) // p.tile_k
        total = tables[2][experts]  # tiles of every group, the tail's included

        if wg_idx == 0:
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if warp_idx == 0:
                self._producer_loop(ring, tma_a, tma_b, sA, sB, mA, mB, k_tiles, total, experts, n_units, tables,
                                    rank_mn, a_mask, b_mask)  # fmt: skip
        else:
            cute.arch.setmaxregister_increase(p.consumer_regs)
            self._consumer_loop(ring, tiled_mma, sA, sB, k_tiles, mD, mBias, total, experts, n_units, tables,
                                tidx, wg_idx, storage, rank_mn, tma_d, mD_tma, d_staged, warp_idx)  # fmt: skip

    # ------------------------------------------------------------------ the group tables
    @cute.jit
    def _build_tables(self, mOffs, rows_total, n_units, tables, tidx, warp_idx):
        """first_row[g], row_count[g] (every thread, a few groups each; offsets clamped into
        [0, T]) and tile_end[g], the running total of cluster tiles through group g (row units of
        ``cluster_m`` row tiles times ``n_units`` column units of ``cluster_n`` column tiles; warp
        0, a warp scan per 32 groups). Group E is the tail: rows offs[E-1] .. T."""
        p = self.plan
        first_row, row_count, tile_end = tables
        experts = mOffs.shape[0]
        groups = experts + 1
        for g in cutlass.range(tidx, groups, self.threads):
            start = cutlass.Int32(0)
            if g > 0:
                start = cutlass.min(cutlass.max(mOffs[g - 1], cutlass.Int32(0)), rows_total)
            end = rows_total
            if g < experts:
                end = cutlass.min(cutlass.max(mOffs[g], cutlass.Int32(0)), rows_total)
            first_row[g] = start
            row_count[g] = cutlass.max(end - start, cutlass.Int32(0))
        cute.arch.sync_threads()
        if warp_idx == 0:
            lane = cute.arch.lane_idx()
            carry = cutlass.Int32(0)
            for base in cutlass.range(0, groups, WARP):
                g = base + lane
                tiles = cutlass.Int32(0)
                if g < groups:
                    unit_m = p.tile_m * p.cluster_m
                    tiles = (row_count[g] + unit_m - 1) // unit_m * n_units
                for d in cutlass.range_constexpr(5):  # inclusive scan over the warp's 32 groups
                    up = cute.arch.shuffle_sync_up(tiles, 1 << d)
                    if lane >= (1 << d):
                        tiles = tiles + up
                if g < groups:
                    tile_end[g] = carry + tiles
                carry = carry + cute.arch.shuffle_sync(tiles, WARP - 1)

    @cute.jit
    def _locate(self, idx, experts, n_units, tables, rank_mn):
        """Cluster tile ``idx`` of the linear order, as this CTA (at ``rank_mn`` in its cluster)
        holds it: (its group, its column tile, its first row, the rows of its group it holds:
        0 to tile_m)."""
        p = self.plan
        first_row, row_count, tile_end = tables
        lo = cutlass.Int32(0)
        hi = experts  # the tail, the last group
        for _ in cutlass.range_constexpr(self.search_steps):  # smallest g with tile_end[g] > idx
            if lo < hi:
                mid = (lo + hi) // 2
                if tile_end[mid] > idx:
                    hi = mid
                else:
                    lo = mid + 1
        g = lo
        before = cutlass.Int32(0)
        if g > 0:
            before = tile_end[g - 1]
        local = idx - before
        rows = row_count[g]
        m_units = (rows + p.tile_m * p.cluster_m - 1) // (p.tile_m * p.cluster_m)
        mt = cutlass.Int32(0)
        nt = cutlass.Int32(0)
        if cutlass.const_expr(p.raster_along_m):
            mt = local % m_units
            nt = local // m_units
        else:
            nt = local % n_units
            mt = local // n_units
        mt = mt * p.cluster_m + rank_mn[0]
        nt = nt * p.cluster_n + rank_mn[1]
        row0 = first_row[g] + mt * p.tile_m
        return g, nt, row0, cutlass.max(cutlass.min(rows - mt * p.tile_m, p.tile_m), cutlass.Int32(0))

    # ------------------------------------------------------------------ producer
    @cute.jit
    def _producer_loop(self, ring, tma_a, tma_b, sA, sB, mA, mB, k_tiles, total, experts, n_units, tables,
                       rank_mn, a_mask, b_mask):  # fmt: skip
        """One warp: per tile of this CTA, its K blocks (none for the tail), each a TMA load of
        the tile's rows of x and one of the expert's weight tile into one ring stage (in a
        cluster of two: this CTA's half of the shared tile, multicast to both)."""
        p = self.plan
        cm, cn = p.cluster_m, p.cluster_n
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, p.stages)
        idx = cute.arch.block_idx()[0] // (cm * cn)
        step = cute.arch.grid_dim()[0] // (cm * cn)
        mA_2d = mA[None, None, 0]
        while idx < total:
            g, nt, row0, _ = self._locate(idx, experts, n_units, tables, rank_mn)
            kt_count = cutlass.Int32(0)
            if g < experts:
                kt_count = k_tiles
            expert = cutlass.min(g, experts - 1)  # the tail loads nothing; keep its coordinates in range
            gA = cute.local_tile(cute.domain_offset((row0, 0), mA_2d), (p.tile_m, p.tile_k), (0, None))
            gB = cute.local_tile(mB[None, None, expert], (p.tile_n, p.tile_k), (nt, None))
            tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
                tma_a, rank_mn[1], cute.make_layout(cn), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2)
            )
            tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
                tma_b, rank_mn[0], cute.make_layout(cm), cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2)
            )
            for kt in range(kt_count):
                ring.producer_acquire(state)
                barrier = ring.producer_get_barrier(state)
                cute.copy(tma_a, tAgA[(None, kt)], tAsA[(None, state.index)], tma_bar_ptr=barrier, mcast_mask=a_mask)
                cute.copy(tma_b, tBgB[(None, kt)], tBsB[(None, state.index)], tma_bar_ptr=barrier, mcast_mask=b_mask)
                ring.producer_commit(state)
                state.advance()
            idx = idx + step
        ring.producer_tail(state)

    # ------------------------------------------------------------------ consumers
    @cute.jit
    def _consumer_loop(self, ring, tiled_mma, sA, sB, k_tiles, mD, mBias, total, experts, n_units, tables,
                       tidx, wg_idx, storage, rank_mn, tma_d, mD_tma, d_staged, warp_idx):  # fmt: skip
        """The consumer warpgroups: per tile, WGMMA over the ring (one batch in flight, each
        stage released as soon as its WGMMAs retire), then the epilogue (``_store_tile``).
        Ping-pong: each consumer walks every tile of the CTA's sequence, serves every other one
        (consumer c the tiles c, c + 2, ...) and skips the ring stages of the other's."""
        p = self.plan
        consumer_idx = wg_idx - 1
        order = storage.order_barriers.data_ptr()
        if cutlass.const_expr(p.pingpong):
            group_tidx = tidx % THREADS_PER_WARPGROUP
            mma_slice = 0
            store_warp = wg_idx * 4
            group = consumer_idx
        else:
            group_tidx = tidx - THREADS_PER_WARPGROUP
            mma_slice = consumer_idx * THREADS_PER_WARPGROUP
            store_warp = 4
            group = 0
        order_phase = 1 - consumer_idx
        thr_mma = tiled_mma.get_slice(mma_slice)
        thr_mma_c = tiled_mma.get_slice(group_tidx)
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
        k_blocks = cute.size(tCrB, mode=[2])
        # Each accumulator register's (row, column) inside the tile.
        cT = cute.make_identity_tensor((p.tile_m, p.tile_n))
        acc = cute.make_rmem_tensor(thr_mma.partition_C(cT).shape, self.acc_dtype)
        tCcT = thr_mma_c.partition_C(cT)
        # The TMA store of whole tiles: the GEMM kernel's staging (stmatrix into this group's
        # epilogue buffers, one TMA store per column chunk from the group's store warp).
        epi = None
        if cutlass.const_expr(p.smem_epilogue):
            epi_barrier = pipeline.NamedBarrier(barrier_id=1 + group, num_threads=self.epi_threads)
            sD = storage.sD.get_tensor(d_staged.outer, swizzle=d_staged.inner)
            r2s_atom = sm90_utils.sm90_get_smem_store_op(self.d_layout, elem_ty_d=self.d_dtype, elem_ty_acc=self.acc_dtype)
            stm_atom = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(self.d_layout.is_m_major_c(), 4), self.d_dtype)
            r2s = cute.make_tiled_copy_S(r2s_atom, cute.make_tiled_copy_C_atom(stm_atom, tiled_mma))
            thr_r2s = r2s.get_slice(group_tidx)
            chunk_shape = cute.shape(thr_r2s.partition_S(sD))[:3]
            tRS_chunk = cute.make_rmem_tensor(chunk_shape, self.acc_dtype)
            epi = (r2s.retile(acc), tRS_chunk, cute.make_rmem_tensor(chunk_shape, self.d_dtype), cute.size(tRS_chunk),
                   r2s, thr_r2s.partition_D(sD), sD, epi_barrier)  # fmt: skip
        tiles_done = cutlass.Int32(0)  # tiles stored through the staging buffers

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, p.stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, p.stages)
        idx = cute.arch.block_idx()[0] // (p.cluster_m * p.cluster_n)
        step = cute.arch.grid_dim()[0] // (p.cluster_m * p.cluster_n)
        turn = cutlass.Int32(0)  # the tile's place in the CTA's sequence, modulo 2
        while idx < total:
            g, nt, row0, rows = self._locate(idx, experts, n_units, tables, rank_mn)
            kt_count = cutlass.Int32(0)
            if g < experts:
                kt_count = k_tiles
            mine = True
            if cutlass.const_expr(p.pingpong):
                mine = turn == consumer_idx
            if mine:
                if cutlass.const_expr(p.pingpong):
                    cute.arch.mbarrier_wait(order + consumer_idx, order_phase)
                    order_phase = order_phase ^ 1
                acc.fill(0.0)
                tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                cute.nvgpu.warpgroup.fence()
                for kt in range(kt_count):
                    ring.consumer_wait(read)
                    for kb in cutlass.range_constexpr(k_blocks):
                        coord = (None, None, kb, read.index)
                        cute.gemm(tiled_mma, acc, tCrA[coord], tCrB[coord], acc)
                    cute.nvgpu.warpgroup.commit_group()
                    read.advance()
                    if kt > 0:
                        cute.nvgpu.warpgroup.wait_group(1)
                        ring.consumer_release(release)
                        release.advance()
                if cutlass.const_expr(p.pingpong):
                    # Every stage of this tile has been waited on: the other consumer may start.
                    cute.arch.mbarrier_arrive(order + (1 - consumer_idx))
                cute.nvgpu.warpgroup.wait_group(0)
                if kt_count > 0:
                    ring.consumer_release(release)
                    release.advance()
                tiles_done = self._store_tile(acc, tCcT, thr_mma_c, mD, mBias, g, experts, nt, row0, rows, epi,
                                              mD_tma, tma_d, tiles_done, group, warp_idx, store_warp)  # fmt: skip
            else:
                # The other consumer's tile: skip its ring stages.
                read.advance(kt_count)
                release.advance(kt_count)
            turn = 1 - turn
            idx = idx + step
        if cutlass.const_expr(p.smem_epilogue):
            if warp_idx == store_warp:
                cute.arch.cp_async_bulk_wait_group(0, read=True)

    @cute.jit
    def _store_direct(self, acc, tCcT, thr_mma_c, mD, nt, row0, rows):
        """acc, converted to out's dtype, from registers to global memory: a whole tile inside N
        with vector stores, any other under a predicate on the row (< ``rows``) and column (< N)."""
        p = self.plan
        n = mD.shape[1]
        col0 = nt * p.tile_n
        rD = cute.make_rmem_tensor(acc.shape, self.d_dtype)
        rD.store(acc.load().to(self.d_dtype))
        gD = cute.local_tile(cute.domain_offset((row0, 0), mD), (p.tile_m, p.tile_n), (0, nt))
        tCgD = thr_mma_c.partition_C(gD)
        if rows == p.tile_m and col0 + p.tile_n <= n:
            cute.autovec_copy(rD, tCgD)
        else:
            for i in cutlass.range_constexpr(cute.size(rD)):
                crd = tCcT[i]
                if crd[0] < rows and col0 + crd[1] < n:
                    tCgD[i] = rD[i]

    @cute.jit
    def _store_tile(self, acc, tCcT, thr_mma_c, mD, mBias, g, experts, nt, row0, rows, epi, mD_tma, tma_d,
                    tiles_done, group, warp_idx, store_warp):  # fmt: skip
        """acc <- act(acc + bias[g]) (groups; the tail keeps its zeros), converted to out's dtype
        and stored. ``store`` TMA: a tile whose rows all belong to the group goes through shared
        memory and TMA stores (which clip at T and N); the rest, and every tile under ``store``
        DIRECT, from registers: whole tiles with vector stores, others under a predicate on the
        row (< ``rows``, the group's rows in this tile) and the column (< N). Returns the count of
        tiles stored through the staging buffers."""
        p = self.plan
        n = mD.shape[1]
        col0 = nt * p.tile_n
        if g < experts:
            n_last = n - 1
            for i in cutlass.range_constexpr(cute.size(acc)):
                v = acc[i]
                if cutlass.const_expr(p.bias):
                    col = cutlass.min(col0 + tCcT[i][1], n_last)
                    v = v + mBias[g, col].to(cutlass.Float32)
                acc[i] = self._activation(v)
        if cutlass.const_expr(p.smem_epilogue):
            if rows == p.tile_m:
                tRS_acc, tRS_chunk, tRS_out, chunk_size, r2s, tRS_sD, sD, epi_barrier = epi
                gD = cute.local_tile(cute.domain_offset((row0, 0, 0), mD_tma), (p.tile_m, p.tile_n), (None, None, None))
                self._store_tma(acc, tRS_acc, tRS_chunk, tRS_out, chunk_size, r2s, tRS_sD, sD, gD, tma_d,
                                (0, nt, 0), tiles_done, group, warp_idx, store_warp, epi_barrier)  # fmt: skip
                tiles_done = tiles_done + 1
            else:
                self._store_direct(acc, tCcT, thr_mma_c, mD, nt, row0, rows)
        else:
            self._store_direct(acc, tCcT, thr_mma_c, mD, nt, row0, rows)
        return tiles_done
