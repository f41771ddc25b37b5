"""A first-order cost model of a persistent Hopper GEMM's schedule, for ranking seed configs.

Pure arithmetic, no GPU: it predicts which tile shape and which way of sharing the K loop
(data-parallel tiles, serial split-K, stream-K) finishes first, so that a family can put the
likely winners among its first few seeds. The tuner measures every candidate anyway; the model
only decides what it measures first, which matters when a search has 8-16 trials and the right
K-splitting is one config among hundreds.

The model, in units of one multiply-accumulate at a tile's full rate:

* A CTA tile of ``tile_m x tile_n`` runs at ``tile_rate`` of the SM's peak: small tiles read
  more operand bytes per MAC and stall on shared memory (a measured table, below).
* Data-parallel and split-K: ``units = tiles * split`` work units go to ``sms`` CTAs in
  ``ceil(units / sms)`` waves; a unit costs its share of the K loop plus a fixed epilogue and
  pipeline-fill cost per tile, plus, when split, the serial reduction: each of the ``split``
  partial tiles is written and read in split order (``PARTIAL_COST`` per element each).
* Stream-K: every CTA gets the same share of all (tile, K block) iterations, so there are no
  idle SMs; the tiles it cuts are summed in K order, which costs one partial per CTA sharing
  the tile (``ceil(k_blocks / share) + 1`` of them).

Calibrated on the H100's stored wgrad trials (``tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite``,
session 12: 15 conv wgrad problems, 7-16 trials each): the measured best config is among the
model's 4 best-ranked of the configs tried for 14 of the 15, and the rank correlation between
predicted and measured times is 0.34-0.96 (median 0.81). It ignores clusters, rasterisation and
the L2 (which decide the last 10-20%): those stay the tuner's to find.
"""

from __future__ import annotations

import math

from autocutlass.kernels import budgets

__all__ = [
    "EPILOGUE_COST", "PARTIAL_COST", "REDUCE_LAUNCH_COST", "TILE_RATES", "WAVE_FILL", "predicted_cost", "tile_rate",
    "wave_fill", "wave_splits",
]  # fmt: skip

TILE_RATES: dict[tuple[int, int], float] = {
    (64, 64): 0.32, (64, 128): 0.5, (128, 64): 0.55, (64, 192): 0.55, (64, 256): 0.6, (128, 128): 0.85,
    (128, 192): 0.93, (128, 256): 1.0, (256, 64): 0.6, (256, 128): 1.0,
}  # fmt: skip
"""Fraction of an SM's MMA peak a CTA tile (tile_m, tile_n) sustains in its main loop (H100
wgrad trials, 16-bit operands); 1.0 for the 128x256 / 256x128 tiles."""

DEFAULT_RATE = 0.8
"""``tile_rate`` of a tile shape missing from the table."""

EPILOGUE_COST = 96.0
"""Fixed cost of one work unit per output element (MAC units): epilogue store, pipeline fill."""

PARTIAL_COST = 300.0
"""Cost per output element of writing or reading one fp32 partial tile (MAC units)."""


REDUCE_LAUNCH_COST = 6.0e6
"""Workspace split-K's second kernel, launched after the GEMM: about 2 us of launch and tail at
an SM's MAC rate (MAC units)."""


def tile_rate(tile_m: int, tile_n: int) -> float:
    """The main-loop efficiency of a ``tile_m x tile_n`` CTA tile (``TILE_RATES``)."""
    return TILE_RATES.get((tile_m, tile_n), DEFAULT_RATE)


def predicted_cost(
    tiles: int,
    k_blocks: int,
    tile_m: int,
    tile_n: int,
    tile_k: int,
    *,
    split: int = 1,
    stream_k: bool = False,
    workspace: bool = False,
    sms: int = budgets.SM_COUNT_SM90,
    rate: float | None = None,
) -> float:
    """Predicted time of a persistent GEMM with ``tiles`` output tiles of ``tile_m x tile_n``
    and ``k_blocks`` K blocks of ``tile_k`` each, on ``sms`` SMs, in MAC units (comparable only
    between configs of one problem). ``split`` serial splits of the K loop (``workspace``: each
    split writes its partial to a slab of its own, and a separate reduce kernel spread over the
    whole GPU sums them, ``REDUCE_LAUNCH_COST`` plus every partial read once), or ``stream_k``;
    ``rate``: the tile's main-loop efficiency when the caller has its own measurement (a family
    whose kernel runs a tile shape faster or slower than ``TILE_RATES`` says), else ``tile_rate``."""
    if tiles <= 0 or k_blocks <= 0:
        return 0.0
    if split < 1 or sms < 1:
        raise ValueError(f"split={split} and sms={sms} must be positive")
    elems = tile_m * tile_n
    block = elems * tile_k / (rate if rate is not None else tile_rate(tile_m, tile_n))
    fixed = elems * EPILOGUE_COST
    partial = elems * PARTIAL_COST
    if stream_k:
        share = tiles * k_blocks / sms  # K blocks per CTA
        sharers = 1 if share >= k_blocks else math.ceil(k_blocks / share) + 1
        return share * block + math.ceil(tiles / sms) * fixed + (sharers + 2) * partial
    waves = math.ceil(tiles * split / sms)
    if workspace and split > 1:
        unit = math.ceil(k_blocks / split) * block + fixed + partial
        return waves * unit + REDUCE_LAUNCH_COST + tiles * split * partial / sms
    unit = math.ceil(k_blocks / split) * block + fixed + (split * partial if split > 1 else 0.0)
    return waves * unit


WAVE_FILL = 0.95
"""A split count fills the GPU's wave when its work units (output tiles x splits) take at least
this share of its SMs (``wave_splits``)."""


def wave_fill(units: int, sms: int = budgets.SM_COUNT_SM90) -> float:
    """The share of the SM slots of the waves ``units`` work units occupy that they use: 1.0 for
    whole waves, 108 / 132 for 108 units on 132 SMs."""
    return units / (-(-units // sms) * sms) if units > 0 else 0.0


def wave_splits(
    tiles: int,
    k_blocks: int,
    *,
    most: int,
    min_blocks: int = 4,
    sms: int = budgets.SM_COUNT_SM90,
    fill: float | None = None,
) -> tuple[int, ...]:
    """The split count (2..``most``, each split left ``min_blocks`` K blocks or more) whose
    ``tiles * split`` work units fill one wave of ``sms`` CTAs best, if they fill ``fill`` of it or
    more (default ``WAVE_FILL``; the smaller count of a tie): ``(s,)``, or ``()``.

    Split counts listed as products of 2 and 3 miss the 132 SMs of an H100 or H200 (4 x 3 x 11):
    a 3x3 convolution's tiles come in nines, and 18 tiles split 6 ways take 108 SMs where 7 ways
    take 126. One wave only: units that take several waves run one tile's splits (or, batched over
    filter taps, one tap's) in different waves, and the tiles that read one K block then miss the
    L2 (H100, ``conv_wgrad_probe``, 2026-11-27: vae-256@512's wgrad in 22 slabs, three waves, x0.915
    of cuDNN against x0.972 in 7 serial splits; sd-320@64's in 7 slabs x0.655 against x0.940 in 2).
    The GEMM family's counterpart, ``hopper_gemm.split_counts``, also takes whole multi-wave fills
    (a GEMM has no taps to keep together)."""
    if tiles < 1 or sms < 1:
        return ()
    fits = [s for s in range(2, min(most, k_blocks // min_blocks) + 1) if tiles * s <= sms]
    if not fits:
        return ()
    best = max(fits, key=lambda s: (tiles * s, -s))
    return (best,) if wave_fill(tiles * best, sms) >= (WAVE_FILL if fill is None else fill) else ()
