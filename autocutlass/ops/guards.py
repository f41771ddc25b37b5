"""What verification checks besides the output's values: that a candidate wrote nothing outside
its output and changed none of its inputs.

* **Guard bands** (``guarded_nan``): the output the search's inputs hand a kernel is carved out of
  a larger NaN-filled buffer, ``GUARD_BYTES`` on each side (a multiple of 256 bytes, so the
  output keeps the alignment a fresh allocation has). A store past the output's first or last
  element (a tile's rows or columns past the problem, a wrong stride) lands in a band, which
  ``guard_damage`` finds no longer all NaN. Stores inside the output's span but outside its
  elements (a padded stride) are not guarded; the value check sees most of those.
* **Pristine inputs** (``Pristine``): copies of the operands taken when the inputs are built; after
  each candidate, ``Pristine.damage`` compares the operands with them and, when one changed,
  restores it (so the candidates after a bad one are still verified on the right operands) and
  says which. Operands larger together than ``PRISTINE_MAX_BYTES`` are not copied (a very large
  problem's verification then does without this check). A caller may change an operand on purpose
  between verifications (an optimizer step updating a weight in place, a test zeroing a half):
  ``settle`` (called before each launch) takes the copy again of every operand whose version
  counter moved since. Torch's in-place ops move it; a kernel's stores through a raw pointer do
  not, so what a candidate changes is still found.
* **Poisoned scratch** (``poison_scratch``): a runner's split-K or stream-K partial sums are NaN
  before each verification launch, so a kernel that reads a partial its writer has not stored yet
  fails instead of reading the previous launch's (equal) sums.

Device-agnostic like the evaluations that use them (CPU tensors in the unit tests).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

GUARD_BYTES = 4096
"""NaN bytes before and after a guarded output."""
PRISTINE_MAX_BYTES = 2 << 30
"""The most operand bytes ``Pristine`` copies (above it, no copies and no check)."""


def guarded_nan(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str, *,
                memory_format: torch.memory_format = torch.contiguous_format) -> torch.Tensor:  # fmt: skip
    """A NaN-filled tensor of ``shape`` (dense in ``memory_format``) inside a NaN buffer with
    ``GUARD_BYTES`` of guard on each side (``guard_damage``)."""
    strides = torch.empty(shape, dtype=dtype, device="meta", memory_format=memory_format).stride()
    numel = math.prod(shape)
    guard = GUARD_BYTES // torch.empty((), dtype=dtype).element_size()
    flat = torch.full((numel + 2 * guard,), math.nan, dtype=dtype, device=device)
    return flat.as_strided(shape, strides, guard)


def guard_damage(out: torch.Tensor) -> str | None:
    """Why the guard bands around ``out`` (made by ``guarded_nan``) are damaged, or None: every
    element of its storage before its first element and after its last is still NaN. Damaged
    bands are filled with NaN again (the next candidate is checked afresh). A tensor without
    bands passes."""
    if out.numel() == 0:
        return None
    whole = torch.empty(0, dtype=out.dtype, device=out.device).set_(out.untyped_storage())
    start = out.storage_offset()
    end = start + 1 + sum((size - 1) * stride for size, stride in zip(out.shape, out.stride(), strict=True))
    found = []
    for where, band in (("before its first element", whole[:start]), ("after its last element", whole[end:])):
        written = int((~band.isnan()).sum()) if band.numel() else 0
        if written:
            band.fill_(math.nan)
            found.append(f"{written} {where}")
    return f"wrote outside the output: {', '.join(found)}" if found else None


class Pristine:
    """Copies of named operands (see the module docstring)."""

    def __init__(self, operands: Mapping[str, torch.Tensor | None]) -> None:
        live = {k: t for k, t in operands.items() if t is not None}
        total = sum(t.numel() * t.element_size() for t in live.values())
        self.copies: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.versions: dict[str, int | None] = {}
        if total <= PRISTINE_MAX_BYTES:
            self.copies = {k: (t, t.clone()) for k, t in live.items()}
            self.versions = {k: _version(t) for k, t in live.items()}

    def settle(self) -> None:
        """Take again the copies of the operands torch changed in place since (their version
        counter moved): what a caller did on purpose before a launch is not the candidate's."""
        for name, (t, copy) in self.copies.items():
            now = _version(t)
            if now is not None and now != self.versions[name]:
                copy.copy_(t)
                self.versions[name] = now

    def damage(self) -> str | None:
        """The operands changed since the copies were taken (restored now), or None."""
        changed = []
        for name, (t, copy) in self.copies.items():
            if not _same_bits(t, copy):
                t.copy_(copy)
                self.versions[name] = _version(t)
                changed.append(name)
        return f"changed its input(s) {', '.join(changed)}" if changed else None


def poison_scratch(runner: object) -> None:
    """The runner's ``poison_scratch()`` where it has one (runners with split-K or stream-K
    partials fill them with NaN): call it before each candidate's launch in verification."""
    hook = getattr(runner, "poison_scratch", None)
    if hook is not None:
        hook()


def settle(pristine: Pristine | None) -> None:
    """``pristine.settle()`` where there are copies (call it before each candidate's launch)."""
    if pristine is not None:
        pristine.settle()


def versions(*tensors: torch.Tensor | None) -> tuple[int | None, ...] | None:
    """The version counters of ``tensors`` (None for a missing one), or None when one has no
    counter (an inference tensor): what a cache of values derived from them is keyed by."""
    out = []
    for t in tensors:
        v = None if t is None else _version(t)
        if t is not None and v is None:
            return None
        out.append(v)
    return tuple(out)


def _version(t: torch.Tensor) -> int | None:
    """``t``'s version counter (moved by every in-place torch op on it or a view of it), or None
    for an inference tensor, which has none (its copy is then never taken again)."""
    try:
        return int(t._version)
    except RuntimeError:
        return None


def damage(out: torch.Tensor, pristine: Pristine | None) -> str | None:
    """What a candidate that just wrote ``out`` damaged: the guard bands around ``out``, then the
    operands ``pristine`` holds copies of (both repaired); None when nothing."""
    return guard_damage(out) or (pristine.damage() if pristine is not None else None)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal element by element, NaN payloads and signed zeros included (a kernel that wrote a
    NaN where a NaN was, or -0.0 over 0.0, did write)."""
    if a.dtype.is_floating_point and a.element_size() in (1, 2, 4, 8):
        view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(view), b.contiguous().view(view))
    return torch.equal(a, b)
