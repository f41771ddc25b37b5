"""The files whose code decides what the unfolded convolutions generate, and their hashes.

Each runs another family's kernel on the lowered layer (``lowering``), so its sources are that
family's, the mapping (``lowering``: the lowered problem and the tensor transforms) and the
row-unfolding kernels (``unfold``, ``unfold_kernel``, ``unfold_slots_kernel``). Paths are
relative to ``autocutlass/kernels``.
"""

from __future__ import annotations

from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES as _FPROP_SOURCES
from autocutlass.kernels.hopper_conv_wgrad.sources import SOURCE_FILES as _WGRAD_SOURCES

LOWERING = "hopper_conv_unfold/lowering.py"
UNFOLD = ("hopper_conv_unfold/unfold.py", "hopper_conv_unfold/unfold_kernel.py", "hopper_conv_unfold/unfold_slots_kernel.py")
FPROP_SOURCE_FILES = (*_FPROP_SOURCES, LOWERING, *UNFOLD)
WGRAD_SOURCE_FILES = (*_WGRAD_SOURCES, LOWERING, *UNFOLD)
