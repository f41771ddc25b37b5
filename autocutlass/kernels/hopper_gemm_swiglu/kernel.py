"""The SwiGLU GEMM kernel: ``hopper_gemm``'s kernel over a packed gate/up weight (CuTe DSL).

``D = silu(alpha * A @ W_gate^T + b_gate) * (alpha * A @ W_up^T + b_up)`` with the weight packed
as W (2N, K) = cat([W_gate, W_up]), the bias (2N,) likewise, and D (M, N).

**B load: one TMA box over a hierarchical view of W.** With h = tile_n / 2, the kernel's B is
W seen with its row mode shaped (h, 2, N/h) and strides (ld, N*ld, h*ld): the fused column
``c = t*tile_n + half*h + j`` reads W's row ``half*N + t*h + j``. So fused tile t holds gate
rows [t*h, t*h + h) in its first half and the matching up rows in its second, and the mainloop,
producer, multicast and schedules of ``HopperGemmKernel`` run unchanged over it (the TMA
descriptor has five dimensions: j, half, K, t, L). ``check`` asks N % h == 0 and a K-major W.

**Epilogue: register-local pairing.** A thread's WGMMA accumulator holds, per row it owns,
columns 8*i + 2*(lane%4) + {0, 1} for every i: in fragment order the first half of each
accumulator value block (``V`` values) is the gate half of the tile and the second half holds
the same rows' up columns h further (asserted at trace time from thread 0's static
coordinates). ``_epilogue_math`` computes silu(g + b_g) * (u + b_u) in fp32 into the gate
element. Both stores then write only the gate half: ``Store.TMA`` stores the epilogue chunks
of the gate half (chunk ci + h/epi_n holds the up columns of chunk ci) into D's (tile_m, h)
tile by the base's stmatrix + TMA path; ``Store.DIRECT`` stores the gate elements from
registers, one predicated element each.

The kernel's D tensor is the real (M, N) output; its scheduler walks N/h output tiles, as many
as the fused B has. Coordinates of the accumulator (``tCcD``) come from the base's identity
tiling of D by (tile_m, tile_n); the real column of fused tile tn's element at tile column j
(< h) is tn*h + j = crd - tn*h. Imports the DSL when imported.
"""

from __future__ import annotations

from typing import Optional

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.utils as utils

from autocutlass.kernels.budgets import SMEM_BUFFER_ALIGN
from autocutlass.kernels.epilogue_math import activation
from autocutlass.kernels.hopper_gemm.kernel import CUTLASS_DTYPES, HopperGemmKernel, _to_mkl
from autocutlass.ops.gemm.problem import Activation

__all__ = ["CUTLASS_DTYPES", "HopperGemmSwigluKernel"]


class HopperGemmSwigluKernel(HopperGemmKernel):
    """``HopperGemmKernel`` over a packed (gate, up) weight with a SwiGLU epilogue writing (M, N/2)
    of the fused GEMM's (M, N) columns. Plans with C, swap_ab, split-K or tf32/fp8 are refused
    by ``check``; stream-K runs through the base (its fix-up precedes the epilogue)."""

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
        p = self.plan
        half = p.tile_n // 2
        mA = _to_mkl(a, (1, 2, 0))
        mB2 = _to_mkl(b, (2, 1, 0))  # (2N, K, L): W's rows, gate then up
        mD = _to_mkl(d, (1, 2, 0))  # (M, N, L): the real output
        n_out = mD.shape[1]
        s_row = mB2.layout.stride[0]
        # (h, 2, N/h) rows: fused column t*tile_n + half_idx*h + j -> W row half_idx*N + t*h + j.
        mB = cute.make_tensor(
            mB2.iterator,
            cute.make_layout(
                ((half, 2, n_out // half), mB2.shape[1], mB2.shape[2]),
                stride=((s_row, n_out * s_row, half * s_row), mB2.layout.stride[1], mB2.layout.stride[2]),
            ),
        )

        self.a_dtype = mA.element_type
        self.b_dtype = mB.element_type
        self.d_dtype = mD.element_type
        self.acc_dtype = cutlass.Float32
        self.a_layout = utils.LayoutEnum.from_tensor(mA)
        self.b_layout = utils.LayoutEnum.from_tensor(mB2)
        self.d_layout = utils.LayoutEnum.from_tensor(mD)

        self.tiled_mma = utils.hopper_helpers.make_trivial_tiled_mma(
            self.a_dtype,
            self.b_dtype,
            self.a_layout.sm90_mma_major_mode(),
            self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype,
            (p.mma_atoms_m, 1, 1),
            tiler_mn=(64, p.tile_n),
        )
        self.cta_layout_mnk = cute.make_layout((*self.cluster_mn, 1))
        a_staged, b_staged, d_staged = self._smem_layouts()

        tma_a, tA = self._tma_load(mA, a_staged, (p.tile_m, p.tile_k), p.cluster_n)
        tma_b, tB = self._tma_load(mB, b_staged, (p.tile_n, p.tile_k), p.cluster_m)
        d_one = cute.slice_(d_staged, (None, None, 0))
        tma_d, tD = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), mD, d_one, self.epi_tile
        )

        # One work unit per (tile_m, h) tile of D: as many along N as the fused B has tiles.
        gD = cute.zipped_divide(mD, tiler=(p.tile_m, half))
        tiles_mnl = gD[(0, (None, None, None))].shape
        sched_params = utils.PersistentTileSchedulerParams(
            tiles_mnl, (*self.cluster_mn, 1), p.swizzle, p.raster_along_m
        )
        if cutlass.const_expr(p.stream_k):
            k_iters = cutlass.max((mA.shape[1] + p.tile_k - 1) // p.tile_k, 1)
            total = (
                (tiles_mnl[0] + p.cluster_m - 1) // p.cluster_m
                * ((tiles_mnl[1] + p.cluster_n - 1) // p.cluster_n)
                * tiles_mnl[2] * k_iters
            )
            grid = (*self.cluster_mn, cutlass.max(cutlass.min(max_active_clusters, total), 1))
        else:
            grid = utils.StaticPersistentTileScheduler.get_grid_shape(sched_params, max_active_clusters)

        if cutlass.const_expr(not p.smem_epilogue):

            @cute.struct
            class SharedStorageDirect:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, p.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorageDirect
        else:

            @cute.struct
            class SharedStorage:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, p.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]
                sD: cute.struct.Align[cute.struct.MemRange[self.d_dtype, cute.cosize(d_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorage

        self._check_pairing()
        self.kernel(
            tma_a, tA, tma_b, tB, tma_d, tD, mD, None, bias, workspace, counters, None, None, alpha, beta,
            self.tiled_mma, self.cta_layout_mnk, a_staged, b_staged, d_staged, sched_params,
        ).launch(
            grid=grid,
            block=[self.threads, 1, 1],
            cluster=(*self.cluster_mn, 1),
            min_blocks_per_mp=1,
            stream=stream,
        )

    def _check_pairing(self) -> None:
        """Trace-time proof of the register pairing the epilogue relies on: in thread 0's slice of
        the tiled MMA, accumulator value v + V/2 sits h columns right of value v, same row."""
        p = self.plan
        half = p.tile_n // 2
        thr = self.tiled_mma.get_slice(0)
        crd = thr.partition_C(cute.make_identity_tensor((p.tile_m, p.tile_n)))
        v_size = cute.size(crd, mode=[0])
        for rest in range(cute.size(crd) // v_size):
            for v in range(v_size // 2):
                g = crd[v + rest * v_size]
                u = crd[v + v_size // 2 + rest * v_size]
                if not (u[0] == g[0] and u[1] == g[1] + half and g[1] < half):
                    raise AssertionError(f"SwiGLU pairing broken: value {v} at {g}, partner at {u}")

    @cute.jit
    def _epilogue_math(self, acc, tCcD, mD, mC, mBias, alpha, beta):
        """Gate value v of each accumulator block <- silu(alpha*g + b_g) * (alpha*u + b_u), u being
        value v + V/2 (the same row, h columns right). The bias is read at the real column clamped
        into [0, N): past N the result is dropped by the stores."""
        p = self.plan
        half = p.tile_n // 2
        v_size = cute.size(acc, mode=[0])
        n_out = mD.shape[1]
        n_last = n_out - 1
        tn = tCcD[0][1] // p.tile_n  # the fused tile: its columns start at tn * tile_n
        for r in cutlass.range_constexpr(cute.size(acc) // v_size):
            for v in cutlass.range_constexpr(v_size // 2):
                i = r * v_size + v
                g = acc[i] * alpha
                u = acc[i + v_size // 2] * alpha
                if cutlass.const_expr(p.bias):
                    col = cutlass.min(tCcD[i][1] - tn * half, n_last)
                    g = g + mBias[col].to(cutlass.Float32)
                    u = u + mBias[col + n_out].to(cutlass.Float32)
                acc[i] = activation(g, Activation.SILU) * u

    @cute.jit
    def _store_fragment(self, frag, thr_mma_c, mDst, tCcD, tile, extent):
        """Registers -> D: each gate element of the fragment (already in D's dtype) to its real
        column tile[1] * h + j, predicated on M and N."""
        p = self.plan
        half = p.tile_n // 2
        v_size = cute.size(frag, mode=[0])
        shift = tile[1] * half
        for r in cutlass.range_constexpr(cute.size(frag) // v_size):
            for v in cutlass.range_constexpr(v_size // 2):
                i = r * v_size + v
                crd = tCcD[i]
                col = crd[1] - shift
                if cute.elem_less((crd[0], col), (extent[0], extent[1])):
                    mDst[crd[0], col, crd[2]] = frag[i]

    @cute.jit
    def _store_tma(self, acc, tRS_acc, tRS_chunk, tRS_out, chunk_size, r2s, tRS_sD, sD, gD, tma_d,
                   tile, tiles_done, group, warp_idx, store_warp, epi_barrier):
        """The base's stmatrix + TMA store, over the gate half's chunks only, into D's (tile_m, h)
        tile: fused tile tn's output is the left (tn even) or right half of D's tile_n-wide tile
        tn // 2 in ``gD`` (the base's tiling of D's TMA coordinates)."""
        p = self.plan
        half = p.tile_n // 2
        gD_pair = gD[(None, None, tile[0], tile[1] // 2, tile[2])]
        gD_tile = cute.local_tile(gD_pair, (p.tile_m, half), (0, tile[1] % 2))
        gD_epi = cute.zipped_divide(gD_tile, self.epi_tile)
        bSG_sD, bSG_gD = cute.nvgpu.cpasync.tma_partition(
            tma_d, 0, cute.make_layout(1), cute.group_modes(sD, 0, 2), gD_epi
        )
        rows = p.tile_m // p.epi_m
        cols = half // p.epi_n
        full_cols = p.tile_n // p.epi_n
        n_out = rows * cols
        for k in cutlass.range_constexpr(n_out):
            mi = k // cols
            ni = k % cols
            ci = mi * full_cols + ni  # the accumulator chunk of this output chunk
            for v in cutlass.range_constexpr(chunk_size):
                tRS_chunk[v] = tRS_acc[ci * chunk_size + v]
            tRS_out.store(tRS_chunk.load().to(self.d_dtype))
            buf = (tiles_done * n_out + k) % p.epi_stages + group * p.epi_stages
            cute.copy(r2s, tRS_out, tRS_sD[(None, None, None, buf)])
            cute.arch.fence_proxy("async.shared", space="cta")
            if warp_idx == store_warp:
                cute.arch.cp_async_bulk_wait_group(p.epi_stages - 2, read=True)
            epi_barrier.arrive_and_wait()
            if warp_idx == store_warp:
                cute.copy(tma_d, bSG_sD[(None, buf)], bSG_gD[(None, (mi, ni))])
                cute.arch.cp_async_bulk_commit_group()
