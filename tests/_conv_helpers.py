"""Helpers shared by the conv kernel tests: whether the CuTe DSL can compile here (marker
``compile``), and the GPU tests' verification of one (family, config, problem)."""

from __future__ import annotations

import os
from typing import Any


def dsl_available() -> bool:
    """Whether nvidia-cutlass-dsl imports (with CUTE_DSL_ARCH=sm_90a set first: the DSL reads the
    target on its first import, and off-GPU it has no other)."""
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    try:
        import cutlass  # noqa: F401
    except ImportError:
        return False
    return True


def verify_conv(family: Any, config: Any, p: Any, seed: int = 0) -> tuple[Any, Any]:
    """Compile ``config`` of ``family`` for conv problem ``p``, run it once on a NaN-poisoned output
    and compare with the float32 reference (``ops.conv.evaluation``, the tuner's own check); returns
    (runner, inputs) for further runs."""
    import torch

    from autocutlass.ops.conv import evaluation as ev

    assert family.check(config, p) is None, family.check(config, p)
    runner = family.compile(config, p)
    inputs = ev.make_inputs(p, device=torch.device("cuda"), seed=seed)
    ref = ev.reference(p, inputs)
    ok, why = ev.verify(runner, p, inputs, ref)
    assert ok, f"{config} on {p.describe()}: {why}"
    return runner, inputs
