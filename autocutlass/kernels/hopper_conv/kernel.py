"""The sm_90a implicit-GEMM conv2d fprop kernel, written in CuTe DSL.

It is the GEMM family's warp-specialised persistent kernel (``hopper_gemm.kernel``) with another
producer: the consumers (WGMMA over the shared-memory ring, cooperative or ping-pong), serial
split-K, stream-K's partial-tile fix-up and the epilogue ``act(alpha * acc + beta * residual +
bias)`` with its stmatrix + TMA store (or direct store) are inherited unchanged; this module
replaces the host-side set-up (``__call__``: the grid, one cluster per resident slot for
stream-K), the kernel entry (``kernel``) and the producer (``_conv_producer``, which walks the
persistent scheduler's tiles or, for stream-K, the segments of its cluster's span of (tile, K
block) iterations).

The implicit GEMM: M = N*P*Q output pixels (q fastest, then p, then the image), N = K output
channels, K = R*S taps x C channels. Per K block the producer issues

* A: one im2col TMA load (``CopyBulkTensorIm2ColG2SOp``, multicast across ``cluster_n``) of
  ``tile_m`` output pixels x ``tile_k`` channels of one filter tap (r, s). The descriptor holds
  the bounding box of the filter's top-left corner (lower corner -pad, upper corner
  pad - (R-1)*dilation, per spatial dimension), the traversal stride (the convolution stride)
  and the dilation; the load's coordinates name the tile's first output pixel and channel block,
  its im2col offsets the tap. TMA walks the pixels along W, then H, then the images, so a tile
  may start anywhere and cross rows and images; out-of-image pixels (padding) and channels past C
  arrive as zeros.
* B: one tiled TMA load (multicast across ``cluster_m``) of the filter, viewed as (K, C, S, R),
  at (output-channel tile, channel block, s, r).

The K loop walks channel blocks fastest, then s, then r: K block kb is channel block
kb % ceil(C / tile_k) of tap kb // ceil(C / tile_k) (r major). Stride, padding and dilation are
run-time arguments (the descriptor is encoded on the host at each launch); N, H, W, C, K are
symbolic; R and S are compile-time.

Tensors, in torch's channels_last views: x as (N, H, W, C) (C contiguous), w as (K, R, S, C)
(C contiguous), y and the residual as (N*P*Q, K) (K contiguous), bias (K,).
"""

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute, pipeline, utils
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait
from cutlass.tensor_utils import LayoutEnum

from autocutlass.kernels.budgets import (
    PRODUCER_REGS,
    SMEM_BUFFER_ALIGN,
    THREADS_PER_WARPGROUP,
)
from autocutlass.kernels.hopper_conv.plan import ConvPlan
from autocutlass.kernels.hopper_gemm.kernel import (
    CUTLASS_DTYPES,
    HopperGemmKernel,
    _to_mkl,
)

__all__ = ["CUTLASS_DTYPES", "HopperConvKernel"]


class HopperConvKernel(HopperGemmKernel):
    """Compile-time object: all attributes derive from the frozen ``ConvPlan``."""

    def __init__(self, plan: ConvPlan) -> None:
        super().__init__(plan.gemm)
        self.conv_plan = plan
        self.filter_rs = (plan.r, plan.s)

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(
        self,
        x: cute.Tensor,
        w: cute.Tensor,
        d: cute.Tensor,
        c: cute.Tensor | None,
        bias: cute.Tensor | None,
        workspace: cute.Tensor | None,
        counters: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        stride_h: cutlass.Int32,
        stride_w: cutlass.Int32,
        pad_h: cutlass.Int32,
        pad_w: cutlass.Int32,
        dil_h: cutlass.Int32,
        dil_w: cutlass.Int32,
        max_active_clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        self._launch(x, w, d, c, bias, workspace, counters, alpha, beta, (pad_w, pad_h), (pad_w, pad_h),
                     (stride_w, stride_h), (dil_w, dil_h), max_active_clusters, stream)  # fmt: skip

    @cute.jit
    def _output_views(self, d: cute.Tensor, c: cute.Tensor | None):
        """(mD, mC): y and the residual, (N*P*Q, K) in torch's order, as CuTe's (M, N, L)."""
        mD = _to_mkl(d, (1, 2, 0))
        mC = None
        if cutlass.const_expr(self.plan.with_c):
            mC = _to_mkl(c, (1, 2, 0))
        return mD, mC

    @cute.jit
    def _launch(self, x, w, d, c, bias, workspace, counters, alpha, beta, pad_lo, pad_hi, traversal_stride, dilation,
                max_active_clusters, stream):
        """Build the operands' views and TMA atoms and launch ``kernel``. The im2col geometry
        comes as (W, H) pairs: the padding before and after the input (a forward convolution pads
        both sides alike), the traversal stride (the convolution stride) and the dilation."""
        p = self.plan
        taps_r, taps_s = self.filter_rs
        # x (N, H, W, C) -> the im2col TMA's ((W, H, N), C); w (K, R, S, C) -> (K, C, S, R).
        n_img, h_img, w_img, chans = x.shape
        mX = cute.make_tensor(
            x.iterator,
            cute.make_layout(((w_img, h_img, n_img), chans), stride=((x.stride[2], x.stride[1], x.stride[0]), 1)),
        )
        mB = cute.make_tensor(w.iterator, cute.select(w.layout, mode=[0, 3, 2, 1]))
        mD, mC = self._output_views(d, c)

        self.a_dtype = mX.element_type
        self.b_dtype = mB.element_type
        self.d_dtype = mD.element_type
        self.acc_dtype = cutlass.Float32
        # Both operands are K-major (channels contiguous); D is row-major (K contiguous).
        self.a_layout = LayoutEnum.ROW_MAJOR
        self.b_layout = LayoutEnum.ROW_MAJOR
        self.d_layout = LayoutEnum.from_tensor(mD)

        # The GEMM's tiled MMA: split along M between cooperative consumers, or along N for a
        # 192-row tile (``Plan.n_split``: each consumer accumulates all rows of half the columns).
        self.tiled_mma = self._tiled_mma((p.mma_atoms_m, p.mma_atoms_n, 1))
        self.cta_layout_mnk = cute.make_layout((*self.cluster_mn, 1))
        a_staged, b_staged, d_staged = self._smem_layouts()

        # The bounding box of the filter's top-left corner: lower corner -pad_lo, upper corner
        # pad_hi - (taps - 1) * dilation (W first). Its pixel count along W is Q, along H is P.
        a_op = (
            cute.nvgpu.cpasync.CopyBulkTensorIm2ColG2SOp()
            if p.cluster_n == 1
            else cute.nvgpu.cpasync.CopyBulkTensorIm2ColG2SMulticastOp()
        )
        tma_a, tA = cute.nvgpu.cpasync.make_im2col_tma_atom(
            a_op,
            mX,
            cute.slice_(a_staged, (None, None, 0)),
            (p.tile_m, p.tile_k),
            lower_corner_whd=(-pad_lo[0], -pad_lo[1]),
            upper_corner_whd=(pad_hi[0] - (taps_s - 1) * dilation[0], pad_hi[1] - (taps_r - 1) * dilation[1]),
            lower_padding_whd=pad_lo,
            upper_padding_whd=pad_hi,
            stride_whd=traversal_stride,
            lower_srt=(0, 0),
            stride_srt=dilation,
            num_multicast=p.cluster_n,
        )
        tma_b, tB = self._tma_load(mB, b_staged, (p.tile_n, p.tile_k), p.cluster_m)
        d_one = cute.slice_(d_staged, (None, None, 0))
        tma_d, tD = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), mD, d_one, self.epi_tile
        )

        gD = cute.zipped_divide(mD, tiler=(p.tile_m, p.tile_n))
        tiles_mnl = gD[(0, (None, None, None))].shape
        units_mnl = (tiles_mnl[0], tiles_mnl[1], tiles_mnl[2] * p.split_k)
        sched_params = utils.PersistentTileSchedulerParams(
            units_mnl, (*self.cluster_mn, 1), p.swizzle, p.raster_along_m
        )
        if cutlass.const_expr(p.stream_k):
            # Stream-K: one cluster per resident cluster slot, never more than there are iterations.
            c_blocks = (chans + p.tile_k - 1) // p.tile_k
            total = (
                (tiles_mnl[0] + p.cluster_m - 1) // p.cluster_m
                * ((tiles_mnl[1] + p.cluster_n - 1) // p.cluster_n)
                * cutlass.max(c_blocks * (taps_r * taps_s), 1)
            )
            grid = (*self.cluster_mn, cutlass.max(cutlass.min(max_active_clusters, total), 1))
        else:
            grid = utils.StaticPersistentTileScheduler.get_grid_shape(sched_params, max_active_clusters)
            c_blocks = (chans + p.tile_k - 1) // p.tile_k

        self._define_shared_storage(a_staged, b_staged, d_staged)
        self.kernel(
            tma_a, tA, tma_b, tB, tma_d, tD, mD, mC, bias, workspace, counters, alpha, beta, c_blocks,
            self.tiled_mma, self.cta_layout_mnk, a_staged, b_staged, d_staged, sched_params,
        ).launch(
            grid=grid,
            block=[self.threads, 1, 1],
            cluster=(*self.cluster_mn, 1),
            min_blocks_per_mp=1,
            stream=stream,
        )

    def _define_shared_storage(self, a_staged, b_staged, d_staged) -> None:
        """The ring, the ping-pong order barriers, the operand buffers and (TMA store) the
        epilogue's staging buffers, as the inherited consumers expect them."""
        if not self.plan.smem_epilogue:

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
        mC: cute.Tensor | None,
        mBias: cute.Tensor | None,
        mWork: cute.Tensor | None,
        mCount: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        c_blocks: cutlass.Int32,
        tiled_mma: cute.TiledMma,
        cta_layout_mnk: cute.Layout,
        a_staged: cute.ComposedLayout,
        b_staged: cute.ComposedLayout,
        d_staged: cute.ComposedLayout,
        sched_params: utils.PersistentTileSchedulerParams,
    ):
        p = self.plan
        taps_r, taps_s = self.filter_rs
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
            # The inherited ping-pong consumers alternate their mainloops on these two barriers.
            if tidx == 0:
                order = storage.order_barriers.data_ptr()
                cute.arch.mbarrier_init(order, THREADS_PER_WARPGROUP)
                cute.arch.mbarrier_init(order + 1, THREADS_PER_WARPGROUP)
            cute.arch.mbarrier_init_fence()
        pipeline_init_arrive(cluster_shape_mn=self.cluster_mn, is_relaxed=True)

        sA = storage.sA.get_tensor(a_staged.outer, swizzle=a_staged.inner)
        sB = storage.sB.get_tensor(b_staged.outer, swizzle=b_staged.inner)

        # A: (tile_m, (tile_k, 1, 1), pixel tiles, channel blocks, S, R) of im2col coordinates;
        # B: (tile_n, tile_k, output-channel tiles, channel blocks, S, R) of filter coordinates.
        gA = cute.local_tile(mA, (p.tile_m, (p.tile_k, 1, 1)), (None, (None, None, None)))
        gB = cute.local_tile(mB, (p.tile_n, p.tile_k), (None, None, None, None))
        k_tiles = c_blocks * (taps_r * taps_s)
        geom = None
        if cutlass.const_expr(p.stream_k):
            geom = self._stream_geometry(cute.size(gA, mode=[2]), cute.size(gB, mode=[2]), 1, k_tiles)

        pipeline_init_wait(cluster_shape_mn=self.cluster_mn)

        if wg_idx == 0:
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if warp_idx == 0:
                self._conv_producer(
                    ring, tma_a, tma_b, sA, sB, gA, gB, k_tiles, c_blocks, a_mask, b_mask,
                    cta_layout_mnk, cluster_coord, sched_params, geom,
                )
        else:
            cute.arch.setmaxregister_increase(p.consumer_regs)
            self._consumer(
                ring, tiled_mma, sA, sB, k_tiles, storage, d_staged, tma_d, mD_tma, mD, mC, mBias,
                mWork, mCount, alpha, beta, tidx, warp_idx, wg_idx, sched_params, geom, cluster_coord, cta_rank,
            )

    # ------------------------------------------------------------------ producer
    @cute.jit
    def _load_unit(self, ring, state, tma_a, tma_b, tAsA, tBsB, tAgA_t, tBgB_t, kt0, kt_count, c_blocks, a_mask,
                   b_mask):
        """A work unit's K blocks ``kt0`` .. ``kt0 + kt_count - 1`` (channel block fastest, then the
        tap's s, then r), each an im2col load of A and a tiled load of B into the next ring stage;
        returns the producer state after them."""
        taps_s = self.filter_rs[1]
        for kt in range(kt_count):
            kb = kt0 + kt
            tap = kb // c_blocks
            cb = kb - tap * c_blocks
            r = tap // taps_s
            s = tap - r * taps_s
            ring.producer_acquire(state)
            barrier = ring.producer_get_barrier(state)
            cute.copy(tma_a, tAgA_t[(None, cb, s, r)], tAsA[(None, state.index)], tma_bar_ptr=barrier,
                      mcast_mask=a_mask)
            cute.copy(tma_b, tBgB_t[(None, cb, s, r)], tBsB[(None, state.index)], tma_bar_ptr=barrier,
                      mcast_mask=b_mask)
            ring.producer_commit(state)
            state.advance()
        return state

    @cute.jit
    def _conv_producer(self, ring, tma_a, tma_b, sA, sB, gA, gB, k_tiles, c_blocks, a_mask, b_mask,
                       cta_layout_mnk, cluster_coord, sched_params, geom):
        """One warp: for each of the CTA's work units, its K blocks (channel block fastest, then
        the tap's s, then r), each an im2col load of A and a tiled load of B into one ring stage.
        Stream-K: the units are the segments of the cluster's span of (tile, K block) iterations
        (``_stream_unit``), in the order the inherited consumers take them. The K blocks of a unit:
        ``_load_unit``."""
        a_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (0, None, 0)).shape)
        tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
            tma_a, cluster_coord[1], a_cta_layout, cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2)
        )
        b_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (None, 0, 0)).shape)
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
            tma_b, cluster_coord[0], b_cta_layout, cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2)
        )
        if cutlass.const_expr(self.plan.stream_k):
            it, end = self._stream_span(geom, cute.arch.block_idx()[2])
            state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.plan.stages)
            while it < end:
                unit, kt0, count = self._stream_unit(geom, it, end, cluster_coord)
                kt_count = cutlass.max(cutlass.min(count, k_tiles - kt0), 0)
                tAgA_t = tAgA[(None, unit[0], None, None, None)]
                tBgB_t = tBgB[(None, unit[1], None, None, None)]
                state = self._load_unit(ring, state, tma_a, tma_b, tAsA, tBsB, tAgA_t, tBgB_t, kt0, kt_count,
                                        c_blocks, a_mask, b_mask)
                it = it + count
        else:
            sched = utils.StaticPersistentTileScheduler.create(
                sched_params, cute.arch.block_idx(), cute.arch.grid_dim()
            )
            work = sched.initial_work_tile_info()
            state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.plan.stages)
            while work.is_valid_tile:
                unit = work.tile_idx
                _, kt0, kt_count = self._split_range(unit, k_tiles)
                tAgA_t = tAgA[(None, unit[0], None, None, None)]
                tBgB_t = tBgB[(None, unit[1], None, None, None)]
                state = self._load_unit(ring, state, tma_a, tma_b, tAsA, tBsB, tAgA_t, tBgB_t, kt0, kt_count,
                                        c_blocks, a_mask, b_mask)
                sched.advance_to_next_work()
                work = sched.get_current_work()
        ring.producer_tail(state)
