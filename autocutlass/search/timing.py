"""The timing protocol: how every candidate, and torch.matmul beside it, is timed.

Version: ``autocutlass.device.TIMING_PROTOCOL_VERSION`` (part of every record's hard key; bump it
when anything below changes, so that old records stop being compared with new ones).

Protocol, version 1 (``time_callable``):

1. **Warm-up.** One call, synchronise (lazy initialisation, module load); then an estimate of
   the per-call time from ``ESTIMATE_CALLS`` event-bracketed calls; then more warm-up calls
   until about ``WARMUP_MS`` of GPU time have run (at least ``MIN_WARMUP`` calls), so clocks
   and caches reach their steady state.
2. **L2 flush, not buffer rotation.** Before every timed call a buffer of ``flush_bytes``
   (the caller passes twice the L2 size) is overwritten with ``zero_()``. Its writes evict
   A, B and D from L2, so a small problem is timed as it runs inside a model, from HBM, not
   from a warm cache. The flush runs *outside* the timed interval.
3. **CUDA events.** Each timed call sits between its own pair of events on the current stream;
   nothing synchronises inside the loop. Before the loop, ``torch.cuda._sleep`` keeps the GPU
   busy long enough for the host to enqueue every repetition (``head_start_ms``: sized from the
   host time of the estimate's calls since session 21, 50 us a repetition before), so a slow
   launch path is never part of a measured interval (the flush before each call also gives the
   host a head start).
4. **Repetitions.** Enough to cover about ``REP_MS`` of GPU time, clamped to
   [``MIN_REPS``, ``MAX_REPS``] (or exactly ``reps`` when given).
5. **Statistics.** Median, 20th and 80th percentiles (linear interpolation) of the per-call
   times in milliseconds: ``Timing(median_ms, p20_ms, p80_ms, n)``.

**Host time** (an addition that changes none of the GPU measurement above, so no new protocol
version): each timed repetition's call is also bracketed on the host by ``time.perf_counter``,
and ``Timing.host_ms`` is the 20th percentile of those intervals: what issuing one call costs the
CPU (argument checks, descriptors, the launch itself), the low percentile because a full launch
queue or a preempted thread only ever adds to it. Vendor verdicts weigh it (``autocutlass.vendor``):
a convnet's training step at moderate batch is bound by the host, where cuDNN's calls cost more
than our launches.

**Disturbed timings** (``steady``; like host time, no change to the measurement above): the
search's single timing of a candidate or of torch is taken again, up to ``STEADY_ATTEMPTS`` times in
all, while its p80 exceeds ``DISTURBED_SPREAD`` times its p20, a spread no kernel's steady per-call
times have (another process on the GPU, a clock or power event during the repetitions). One such
timing otherwise drops a config from the search: the finals only see the fastest few.

**Noise and ties** (``beats``): ``a`` beats ``b`` only when ``b.median - a.median`` exceeds the
noise, which is the larger of half the wider p20..p80 spread of the two and ``NOISE_FLOOR_REL``
of ``b``'s median (run-to-run drift on H100/H200 is a few percent; a 1% floor keeps a lucky
sample from deciding). Candidates that do not beat each other are a tie; during the search, and
when no finals decide, the tuner gives a tie to the simpler config (``KernelFamily.simplicity``).
The finals (``tuner``, step 7) time the fastest few again, interleaved, and judge ties on that.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autocutlass.device import TIMING_PROTOCOL_VERSION

PROTOCOL_VERSION = TIMING_PROTOCOL_VERSION
"""The version of the protocol this module implements (the one in ``autocutlass.device``)."""

ESTIMATE_CALLS = 5
WARMUP_MS = 25.0
MIN_WARMUP = 3
MAX_WARMUP = 500
REP_MS = 100.0
MIN_REPS = 10
MAX_REPS = 200
NOISE_FLOOR_REL = 0.01
"""Relative difference of medians below which two timings are a tie whatever their spread."""
SLEEP_CYCLES_PER_MS = 2_000_000
"""GPU clock cycles per millisecond used to size the pre-loop ``torch.cuda._sleep`` (>= 2 GHz
would make the sleep shorter than intended; H100/H200 boost at 1.98 GHz)."""
MAX_SLEEP_MS = 100.0
SLEEP_PER_REP_MS = 0.05
"""The GPU's head start per timed repetition at least (about 50 us of host time each)."""
HOST_SLACK_MS = 0.02
"""Host time per repetition besides the timed call: the flush's launch and two event records."""


def head_start_ms(n_reps: int, host_ms: float) -> float:
    """How long the GPU sleeps before the timed loop (step 3): long enough for the host to enqueue
    every repetition, ``n_reps`` times the larger of ``SLEEP_PER_REP_MS`` and the estimated host time
    of one call (``host_ms``) plus ``HOST_SLACK_MS``, at most ``MAX_SLEEP_MS``. A call whose launch
    path costs the host more than the GPU runs it (a short cuDNN convolution: 100 us and more of
    host time) would otherwise drain the queue, and its later repetitions' intervals would include
    the GPU waiting for the host."""
    return min(MAX_SLEEP_MS, n_reps * max(SLEEP_PER_REP_MS, host_ms + HOST_SLACK_MS))


@dataclass(frozen=True)
class Timing:
    """Summary of one timed callable: median and spread in milliseconds, the sample count, and the
    host time of one call (``host_ms``; None where it was not measured, e.g. older records)."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    n: int
    host_ms: float | None = None

    @property
    def spread_ms(self) -> float:
        return self.p80_ms - self.p20_ms

    def tflops(self, flops: int) -> float:
        """Throughput in TFLOP/s for a problem of ``flops`` floating-point operations."""
        return flops / (self.median_ms * 1e-3) / 1e12

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"median_ms": self.median_ms, "p20_ms": self.p20_ms, "p80_ms": self.p80_ms, "n": self.n}
        if self.host_ms is not None:
            d["host_ms"] = self.host_ms
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Timing:
        host = d.get("host_ms")
        return cls(float(d["median_ms"]), float(d["p20_ms"]), float(d["p80_ms"]), int(d["n"]),
                   None if host is None else float(host))  # fmt: skip


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of already sorted values, linearly interpolated."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] * (1.0 - frac) + sorted_values[hi] * frac


def summarize(samples_ms: Sequence[float], host_ms: float | None = None) -> Timing:
    """Median and p20/p80 of per-call times (step 5 of the protocol), with ``host_ms`` as given."""
    vals = sorted(float(v) for v in samples_ms)
    if any(not math.isfinite(v) or v < 0 for v in vals):
        raise ValueError(f"timing samples must be finite and non-negative, got {vals[:5]}...")
    return Timing(
        median_ms=percentile(vals, 0.5),
        p20_ms=percentile(vals, 0.2),
        p80_ms=percentile(vals, 0.8),
        n=len(vals),
        host_ms=host_ms,
    )


def host_summary(samples_ms: Sequence[float]) -> float | None:
    """The host time of one call from per-call host intervals: their 20th percentile (module doc);
    None for no samples."""
    vals = sorted(float(v) for v in samples_ms if math.isfinite(v) and v >= 0)
    return percentile(vals, 0.2) if vals else None


def noise_ms(a: Timing, b: Timing) -> float:
    """The margin one timing must win by to count as faster than the other (see module doc)."""
    return max(max(a.spread_ms, b.spread_ms) / 2.0, NOISE_FLOOR_REL * max(a.median_ms, b.median_ms))


def beats(a: Timing, b: Timing) -> bool:
    """True when ``a`` is faster than ``b`` by more than the noise."""
    return b.median_ms - a.median_ms > noise_ms(a, b)


DISTURBED_SPREAD = 1.5
"""A timing whose 80th percentile exceeds its 20th by this factor is taken for disturbed (module
doc). A kernel's per-call times spread a few percent: on an H100 (session 33, call d) a tuning's
trials of one conv layer spread 1.03-1.08 but for one at 71.5 / 587.7 us (median 171.8), a config
its next tuning timed at 15.2 us."""

STEADY_ATTEMPTS = 3
"""How many times ``steady`` measures at most."""


def disturbed(t: Timing) -> bool:
    """True when ``t``'s p80 exceeds ``DISTURBED_SPREAD`` times its p20."""
    return t.p80_ms > DISTURBED_SPREAD * max(t.p20_ms, 0.0)


def steady(measure: Callable[[], Timing], attempts: int = STEADY_ATTEMPTS) -> Timing:
    """``measure()``'s first timing that is not ``disturbed``, measuring again at most ``attempts``
    times in all; when every one is disturbed, the one of the lowest median."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    kept: Timing | None = None
    for _ in range(attempts):
        t = measure()
        if not disturbed(t):
            return t
        if kept is None or t.median_ms < kept.median_ms:
            kept = t
    assert kept is not None
    return kept


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


FLUSH_KINDS = ("write", "read")
"""How the L2 is flushed before each timed call. ``write`` (protocol v1, the tuner's): the buffer
is overwritten, which leaves L2 full of *dirty* lines, so the timed call pays for writing them
back to HBM as it evicts them: up to one L2 (60 MiB on H200) of extra DRAM traffic, about 14 us
at 4.2 TB/s, a large share of a memory-bound call of tens of microseconds (a decode GEMM).
``read``: the buffer is read (a sum), which leaves L2 full of *clean* lines, so the timed call
reads its operands from HBM without that write-back. Benchmarks may report both; the tuner keeps
``write`` (it adds about the same time to every candidate, so rankings agree)."""


def time_callable(
    fn: Callable[[], object],
    *,
    flush_bytes: int,
    warmup: int | None = None,
    reps: int | None = None,
    flush_kind: str = "write",
) -> Timing:
    """Time ``fn`` (which launches GPU work on the current stream) with protocol version 1.

    ``flush_bytes``: size of the L2-flush buffer (pass ``2 * l2_bytes``; 0 disables the flush,
    for tests only). ``warmup`` / ``reps``: fixed counts instead of the time-based defaults.
    ``flush_kind``: one of ``FLUSH_KINDS`` (default ``write``, the protocol's).
    """
    import torch

    if flush_kind not in FLUSH_KINDS:
        raise ValueError(f"flush_kind {flush_kind!r} is not one of {FLUSH_KINDS}")
    device = torch.cuda.current_device()
    stream = torch.cuda.current_stream()
    flush = torch.empty(max(int(flush_bytes), 0) // 4 * 4, dtype=torch.uint8, device=device)
    flush_words = flush.view(torch.int32)
    if flush_kind == "read":
        flush_words.zero_()  # defined contents; then it is only ever read
        torch.cuda.synchronize()

    def flush_l2() -> None:
        if not flush.numel():
            return
        if flush_kind == "write":
            flush.zero_()
        else:
            flush_words.sum()

    # 1. warm-up and estimate
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    flush_l2()
    start.record(stream)
    t0 = time.perf_counter()
    for _ in range(ESTIMATE_CALLS):
        fn()
    host_est_ms = (time.perf_counter() - t0) * 1e3 / ESTIMATE_CALLS
    end.record(stream)
    torch.cuda.synchronize()
    est_ms = max(start.elapsed_time(end) / ESTIMATE_CALLS, 1e-4)
    n_warm = warmup if warmup is not None else _clamp(math.ceil(WARMUP_MS / est_ms), MIN_WARMUP, MAX_WARMUP)
    n_reps = reps if reps is not None else _clamp(math.ceil(REP_MS / est_ms), MIN_REPS, MAX_REPS)
    for _ in range(n_warm):
        fn()
    torch.cuda.synchronize()

    # 2-4. timed repetitions, each after an L2 flush, bracketed by its own events
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_reps)]
    torch.cuda._sleep(int(head_start_ms(n_reps, host_est_ms) * SLEEP_CYCLES_PER_MS))
    host: list[float] = []
    clock = time.perf_counter
    for i in range(n_reps):
        flush_l2()
        starts[i].record(stream)
        t0 = clock()
        fn()
        host.append((clock() - t0) * 1e3)
        ends[i].record(stream)
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)], host_summary(host))
