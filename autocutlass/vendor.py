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
vendor faster. Our record stays what it was (a seed and neighbour for other problems), the
verdict is re-measured by every tuning of the problem, a sibling GPU's verdict is never used, and
``AUTOCUTLASS_VENDOR_VERDICTS=0`` turns verdicts off (our kernels serve every tuned problem; for
measuring them alone).

Pure Python: no torch, no DSL (dispatch and the tuner pass the versions in).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from autocutlass.device import HardKey

VENDOR_FAMILY = "torch"
"""The family name of vendor records (never a kernel family: ``kernels.get_family`` does not know it)."""

VENDOR_MARGIN = 0.01
"""Torch serves when its recorded time is more than this fraction below ours (1%: within the
finals' noise our kernel keeps the problem)."""


def vendor_hash(torch_version: str, cuda_version: str) -> str:
    """The kernel-hash field of vendor records: torch's and CUDA's versions (cuBLAS and cuDNN
    come with them)."""
    text = f"torch {torch_version} cuda {cuda_version}"
    return "torch-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def vendor_hard_key(hard_key: HardKey, torch_version: str, cuda_version: str) -> HardKey:
    """The hard key of the vendor records that go with ``hard_key``'s (same GPU and toolchain)."""
    return replace(hard_key, kernel_hash=vendor_hash(torch_version, cuda_version))


def verdict_pair(problem_key: str, hard_key: HardKey) -> tuple[str, HardKey]:
    """What a record of ours and the vendor record it is judged against share: the problem and the
    hard key without its kernel hash (same GPU and toolchain). Merges keep the two of one tuning
    together by it (``db.transfer``, ``campaign.SharedTuningSink``)."""
    return problem_key, replace(hard_key, kernel_hash="")


def vendor_faster(ours_ms: float, vendor_ms: float) -> bool:
    """True when the vendor's time beats ours by more than ``VENDOR_MARGIN``."""
    return vendor_ms * (1.0 + VENDOR_MARGIN) < ours_ms


__all__ = ["VENDOR_FAMILY", "VENDOR_MARGIN", "vendor_faster", "vendor_hard_key", "vendor_hash", "verdict_pair"]
