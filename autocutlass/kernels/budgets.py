"""Named hardware budgets of the GPUs we target, and pure functions that use them.

Numbers are for sm_90a (H100 / H200 SXM); every feasibility rule reads them from here so that a
message can say what was required, the limit, and what to try.
"""

from __future__ import annotations

SM90_SMEM_PER_BLOCK_OPTIN = 232_448
"""Bytes of dynamic shared memory one block may opt into on sm_90 (227 KiB)."""

SMEM_RESERVED_BYTES = 1024
"""Bytes we keep for mbarriers and the scheduler's scratch, outside the operand buffers."""

SMEM_BUFFER_ALIGN = 1024
"""Alignment of each shared-memory operand buffer (128B swizzle atoms need 1 KiB)."""

PRODUCER_REGS = 40
"""setmaxnreg target of the TMA producer warpgroup; consumers get ``consumer_regs(n)``."""

REGS_PER_SM = 65_536
THREADS_PER_WARPGROUP = 128

ACC_REGS_MAX = 128
"""fp32 accumulator registers per consumer thread we allow (tile_m_per_wg * tile_n / 128).
Above this the epilogue and WGMMA fragments spill."""

TMA_ALIGN_BYTES = 16
"""TMA needs 16-byte aligned base addresses and non-unit strides."""

WGMMA_M = 64
"""Rows of one WGMMA instruction (one warpgroup)."""

SM_COUNT_SM90 = 132
"""Multiprocessors of H100 SXM / H200 SXM; used only when no GPU is present to ask."""


def consumer_regs(num_consumer_wgs: int) -> int:
    """setmaxnreg value for consumer warpgroups so that the block fits 64K registers.

    One producer warpgroup at PRODUCER_REGS; the rest split among consumers, rounded down to a
    multiple of 8 (setmaxnreg's granularity), capped at 240.
    """
    total_per_thread = REGS_PER_SM // THREADS_PER_WARPGROUP  # 512 regs per "thread slot" of a WG
    avail = total_per_thread - PRODUCER_REGS
    per = avail // num_consumer_wgs
    return min(240, per - per % 8)
