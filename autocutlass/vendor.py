"""The vendor library as a recorded contender: torch's time for a tuned problem, and the verdict
that lets torch serve the problems where it is faster than our best kernel.

Every tuning times torch's own path for its problem side by side with the candidates (the finals
interleave them; ``ops.<op>.evaluation.torch_baseline``: cuBLAS for GEMMs, cuDNN in benchmark
mode for convolutions). Besides our winner, the tuner records that time as a best record of the
pseudo-family ``VENDOR_FAMILY`` under the *vendor hard key*: this GPU's hard key with the kernel
hash replaced by ``vendor_hash`` (torch and CUDA versions: a new torch, new cuBLAS and cuDNN,
starts fresh verdicts). Dispatch then serves a problem with torch instead of our stored config when
both records are of the same tuned problem and torch's time beats ours by more than
``VENDOR_MARGIN`` (``vendor_faster``): a user never runs our kernel where the tuning measured the
vendor faster.

**Host time.** Tunings since session 21 also measure what issuing one call costs the CPU, for
torch's path and for our winner (``search.timing``: ``Timing.host_ms``), and keep both in the
vendor record's config (``host_config``). The verdict then compares each side's GPU time plus its
host time: a call costs its GPU time where the GPU is the bottleneck and its host time where the
host is (a convnet's training step at moderate batch: cuDNN's calls cost the host more than our
launches, and a host-bound step pays that difference on every call), so the sum bounds what the
wrong choice can cost in either case by the smaller of the two differences.
Both are the timed callables of the tuning: torch's op as a user calls it, our runner's launch
without the dispatcher's memoised lookup in front of it (a few microseconds on the hit path), a
bias towards ours of that size. ``AUTOCUTLASS_VENDOR_HOST=0`` compares GPU time alone (``vendor_faster`` without host times), as
records without host times always are. Our record stays what it was (a seed and neighbour for other problems), the
verdict is re-measured by every tuning of the problem, a sibling GPU's verdict is never used, and
``AUTOCUTLASS_VENDOR_VERDICTS=0`` turns verdicts off (our kernels serve every tuned problem; for
measuring them alone).

**Variants.** Where torch runs one op by more than one path, as its user's settings pick, the
tuning times each (``ops.<op>.evaluation.baseline_variants``) and records one vendor record per
variant, its name in the vendor hash (``vendor_hash``): a convolution's ``heuristic`` variant is
cuDNN outside benchmark mode (``torch.backends.cudnn.benchmark = False``, PyTorch's default),
which picks its plan by cuDNN's heuristic instead of by timing (often another plan, faster or
slower). A front-end's ``vendor_variant()`` names the variant torch would run for the call being
served (None: none that was timed), and its verdict is judged against that variant's record
alone; a database of tunings before session 43 has no ``heuristic`` record, so a conv2d outside
benchmark mode keeps our kernel there, as it always did.

Pure Python: no torch, no DSL (dispatch and the tuner pass the versions in).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from autocutlass.device import HardKey

VENDOR_FAMILY = "torch"
"""The family name of vendor records (never a kernel family: ``kernels.get_family`` does not know it)."""

_VARIANT_NAME = re.compile(r"[a-z_]*")

VENDOR_MARGIN = 0.01
"""Torch serves when its recorded time is more than this fraction below ours (1%: within the
finals' noise our kernel keeps the problem)."""


MAIN_VARIANT = ""
"""The vendor variant of torch's path as the op's ``torch_baseline`` runs it under its
``baseline_context`` (cuBLAS; cuDNN in benchmark mode): every vendor record before session 43."""


def vendor_hash(torch_version: str, cuda_version: str, variant: str = MAIN_VARIANT) -> str:
    """The kernel-hash field of vendor records: torch's and CUDA's versions (cuBLAS and cuDNN
    come with them), and the variant of torch's path that was timed (module doc: variants),
    readable in front of the hash (``variant_of``)."""
    if not _VARIANT_NAME.fullmatch(variant):
        raise ValueError(f"a vendor variant is empty or lowercase letters and underscores, got {variant!r}")
    text = f"torch {torch_version} cuda {cuda_version}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"torch-{variant}-{digest}" if variant else f"torch-{digest}"


def vendor_hard_key(hard_key: HardKey, torch_version: str, cuda_version: str, variant: str = MAIN_VARIANT) -> HardKey:
    """The hard key of the vendor records that go with ``hard_key``'s (same GPU and toolchain),
    of torch's path in ``variant``."""
    return replace(hard_key, kernel_hash=vendor_hash(torch_version, cuda_version, variant))


def variant_of(vendor_key: HardKey) -> str:
    """The variant of torch's path a vendor record under ``vendor_key`` timed (``vendor_hash``)."""
    parts = vendor_key.kernel_hash.split("-")
    return parts[1] if len(parts) == 3 else MAIN_VARIANT


def verdict_pair(problem_key: str, hard_key: HardKey) -> tuple[str, HardKey]:
    """What a record of ours and the vendor record it is judged against share: the problem and the
    hard key without its kernel hash (same GPU and toolchain). Merges keep the two of one tuning
    together by it (``db.transfer``, ``campaign.SharedTuningSink``)."""
    return problem_key, replace(hard_key, kernel_hash="")


def vendor_faster(ours_ms: float, vendor_ms: float, host: tuple[float, float] | None = None) -> bool:
    """True when the vendor's time beats ours by more than ``VENDOR_MARGIN``; with ``host``
    (the host time of one call of ours and of the vendor's, ``host_times``) each side's time is
    its GPU time plus its host time."""
    if host is not None:
        ours_ms, vendor_ms = ours_ms + host[0], vendor_ms + host[1]
    return vendor_ms * (1.0 + VENDOR_MARGIN) < ours_ms


def vendor_margin(ours_ms: float, vendor_ms: float, host: tuple[float, float] | None = None) -> float:
    """How much one call of ours costs less than the vendor's, in ms (negative: more), on the
    terms of ``vendor_faster``: GPU time, plus each side's host time with ``host``."""
    if host is not None:
        ours_ms, vendor_ms = ours_ms + host[0], vendor_ms + host[1]
    return vendor_ms - ours_ms


HOST_KEY, OURS_HOST_KEY = "host_ms", "ours_host_ms"
"""The vendor record's config keys: the host time of one call of torch's path, and of our winner."""


def host_config(vendor_host_ms: float | None, ours_host_ms: float | None) -> dict[str, float]:
    """The vendor record's config: both host times, or nothing when either was not measured."""
    if vendor_host_ms is None or ours_host_ms is None:
        return {}
    return {HOST_KEY: float(vendor_host_ms), OURS_HOST_KEY: float(ours_host_ms)}


def host_times(vendor_config: Any) -> tuple[float, float] | None:
    """(ours, vendor) host times of one call from a vendor record's config; None where it has none
    (records of tunings before session 21) or they are not finite non-negative numbers."""
    if not isinstance(vendor_config, Mapping):
        return None
    ours, theirs = vendor_config.get(OURS_HOST_KEY), vendor_config.get(HOST_KEY)
    try:
        pair = (float(ours), float(theirs))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return pair if all(math.isfinite(v) and v >= 0 for v in pair) else None


__all__ = [
    "HOST_KEY",
    "MAIN_VARIANT",
    "OURS_HOST_KEY",
    "VENDOR_FAMILY",
    "VENDOR_MARGIN",
    "host_config",
    "host_times",
    "variant_of",
    "vendor_faster",
    "vendor_hard_key",
    "vendor_hash",
    "vendor_margin",
    "verdict_pair",
]
