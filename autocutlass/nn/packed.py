"""Sibling projections of one input as one GEMM: ``PackedLinear`` and ``swap_qkv_`` / ``unswap_qkv_``.

The attention of Llama, Mistral, Qwen2/3 and Gemma models projects one hidden state three times,
``q_proj(x)``, ``k_proj(x)``, ``v_proj(x)``: three ``nn.Linear`` children read the same input, and
in eager decode each is one more kernel launch and one more pass of Python and dispatcher time
(the step is bound by the host there). ``swap_qkv_`` packs such siblings' weights (and biases)
once into one (Nq + Nk + Nv, H) tensor, rows in sibling order, and the projections' parameters
become views of its parts (``param.data``: the same ``Parameter`` objects, state_dict keys and
values; optimizers and in-place updates see one storage), as ``GatedMLP`` packs gate and up.

The siblings stay modules (``PackedLinear``, an ``autocutlass.nn.Linear``) sharing one
``PackedGroup``. Whichever is called first with an input ``x`` computes all of the group's outputs
with one ``autocutlass.linear(x, packed_weight, packed_bias)`` and returns its own part; the
others, called with the same tensor ``x``, take their parts without a launch. The parts are
column views of the one output: a decode step's (one row per sequence) are contiguous; a
prefill's have the packed row stride, which ``view``/``transpose``/attention accept, as any
model's fused-QKV output has.

**What is checked, so that nothing stale or foreign is served.** A part is handed out once, only
to a sibling called with the very tensor object that computed it, at the same version (not
modified in place since; inference tensors, made under ``torch.inference_mode``, keep no version
counter, so there an in-place change of the input between the siblings' calls is not seen), on
the same thread, while the packed weight is at the same version (no in-place update since) and the sibling's own parameters are still the views made at packing
(a ``load_state_dict(assign=True)``, a ``.to()`` or a ``param.data = ...`` replaces them). Every
other call, and every call while autograd records (the gradients must reach the three
parameters), under ``torch.compile`` tracing, or once the parameters were replaced, runs the
sibling's own ``autocutlass.linear`` on its own parameters: the plain ``autocutlass.nn.Linear``.
Unclaimed parts are dropped by the next packed call of the group; a group whose parts go
unclaimed repeatedly (``UNCLAIMED_LIMIT``: a cross-attention's query and key/value read
different inputs; a decoder with cached keys calls the query alone) stops packing, logged once.

Memory: no second copy is kept (the packed tensors are the parameters' storage); the swap
briefly holds both for one group at a time while it copies.

``swap_qkv_(model, groups=(("q_proj", "k_proj", "v_proj"),))`` packs, in place, the children of
every module that has all of a group's names as ``nn.Linear`` (or ``autocutlass.nn.Linear``)
children of one input width, dtype and device, all with or all without a bias; it checks on a
small random input, with policy ``off`` (torch computes), that each packed sibling returns its
original's output, and otherwise restores the parameters and leaves the module alone.
``unswap_qkv_`` makes them plain ``nn.Linear`` / ``autocutlass.nn.Linear`` modules again (their
parameters keep viewing the packed storage).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from autocutlass import api, warmup
from autocutlass.dispatch import policy
from autocutlass.nn.attrs import param
from autocutlass.nn.hits import LinearHits
from autocutlass.nn.modules import Linear, share_state
from autocutlass.nn.swap import Filter

QKV: tuple[tuple[str, ...], ...] = (("q_proj", "k_proj", "v_proj"),)
"""``swap_qkv_``'s default groups: the query, key and value projections of Llama-style attention."""

UNCLAIMED_LIMIT = 2
"""A group of which this many packed products, and at least one in eight, went partly unclaimed
(its siblings are called with different inputs, as a cross-attention's query and key/value
projections are, or some not at all, as a decoder with cached keys calls the query alone) stops
packing: each sibling then runs its own GEMM, computing no unused rows. Logged once."""

_log = logging.getLogger("autocutlass")
_COMPILING = torch.compiler.is_compiling
_GRAD = torch.is_grad_enabled
_THREAD = threading.get_ident
_INFERENCE = torch.is_inference_mode_enabled


def _version(t: torch.Tensor) -> int:
    """``t``'s version counter (bumped by every in-place change); -1 for an inference tensor
    (``torch.inference_mode``), which keeps none."""
    return -1 if t.is_inference() else t._version


class PackedGroup:
    """The packed weight (and bias) of sibling projections, and the parts of its last output not
    yet handed out. ``members`` are the siblings' ``nn.Linear`` modules, in packing order."""

    def __init__(self, members: Sequence[nn.Linear]) -> None:
        self.sizes = [m.weight.shape[0] for m in members]
        with torch.no_grad():
            self.weight = torch.cat([m.weight.detach() for m in members])
            self.bias = None if members[0].bias is None else torch.cat([m.bias.detach() for m in members])  # type: ignore[union-attr]
        self.ptrs: list[tuple[int, int | None]] = []
        """Each member's (weight, bias) data pointers once it views the packed tensors."""
        self.hits = LinearHits()
        """The packed call's hit cache (``autocutlass.nn.hits``), for whichever caller runs it."""
        self._parts: list[torch.Tensor | None] = []
        self._left = 0
        self._products = self._wasted = 0
        """Packed products computed, and those whose parts were not all claimed before the next."""
        self.enabled = True
        """False once packed products went partly unclaimed too often (``UNCLAIMED_LIMIT``)."""
        self._params: list[tuple[torch.Tensor, ...]] = []
        """Each member's (weight, bias) Parameters (``bind``): each keeps its own version counter."""
        self._versions: list[tuple[int, ...]] = []
        """Each member's parameter versions when ``_parts`` were computed."""
        self._input: torch.Tensor | None = None
        self._key: tuple[Any, ...] = ()
        """What ``_parts`` were computed under besides the members' parameters (``_state_key``)."""

    def bind(self, members: Sequence[nn.Linear]) -> None:
        """Make the members' parameters views of the packed tensors (in place: ``param.data``)."""
        start = 0
        self.ptrs = []
        self._params = [tuple(p for p in (m.weight, m.bias) if p is not None) for m in members]
        for m, size in zip(members, self.sizes, strict=True):
            m.weight.data = self.weight[start:start + size]
            if self.bias is not None:
                assert m.bias is not None
                m.bias.data = self.bias[start:start + size]
            start += size
            self.ptrs.append((m.weight.data_ptr(), None if m.bias is None else m.bias.data_ptr()))

    def bound(self, members: Sequence[nn.Linear]) -> bool:
        """Whether ``members``' parameters are still the views ``bind`` made (a
        ``load_state_dict(assign=True)``, a ``.to()`` or a ``param.data = ...`` replaces them)."""
        ptrs = []
        for m in members:
            w, b = param(m, "weight"), param(m, "bias")
            ptrs.append((w.data_ptr(), None if b is None else b.data_ptr()))
        return ptrs == self.ptrs

    def _state_key(self, x: torch.Tensor) -> tuple[Any, ...]:
        """What a product of ``x`` depends on besides ``x`` itself and the members' parameters: the
        versions of ``x`` and of the packed weight, the thread and whether inference mode is on (its
        outputs are inference tensors)."""
        return (_version(x), _version(self.weight), _THREAD(), _INFERENCE())

    def _member_versions(self, index: int) -> tuple[int, ...]:
        """The versions of member ``index``'s weight and bias: an update through a Parameter (an
        optimizer step, an in-place ``load_state_dict``) bumps its own counter, not the packed
        tensor's. A part depends on its own member's parameters only."""
        return tuple(_version(p) for p in self._params[index])

    def take(self, index: int, x: torch.Tensor) -> torch.Tensor | None:
        """Part ``index`` of the packed product of ``x``, if the last one computed was of ``x`` (the
        same object and version, no parameter changed, this thread and inference mode) and the part
        is still unclaimed; claiming it (the last claim lets go of ``x``)."""
        parts, inp, key, versions = self._parts, self._input, self._key, self._versions
        if (not parts or parts[index] is None or inp is not x or key != self._state_key(x)
                or versions[index] != self._member_versions(index)):  # fmt: skip
            return None
        part, parts[index] = parts[index], None
        self._left -= 1
        if not self._left:
            self.drop()
        return part

    def compute(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """All parts of ``x``'s packed product in one ``autocutlass.linear``; returns part
        ``index`` and keeps the others for the siblings (dropping unclaimed older parts)."""
        parts = list(self.hits.linear(x, self.weight, self.bias).split(self.sizes, dim=-1))
        part, parts[index] = parts[index], None
        self._products += 1
        if self._left:  # the last product's parts went unclaimed: siblings fed different inputs?
            self._wasted += 1
            if self._wasted >= UNCLAIMED_LIMIT and self._wasted * 8 >= self._products:
                self.enabled = False
                _log.info("autocutlass: packed projections of %s rows: %d of %d packed products left parts "
                          "unclaimed (siblings called with different inputs, or not at all); each runs its own "
                          "GEMM from now on", self.sizes, self._wasted, self._products)  # fmt: skip
        # published key first (a sibling on another thread compares its own thread with it), then
        # the parts: a take never pairs these parts with an older input or key
        self._key, self._input = self._state_key(x), x
        self._versions = [self._member_versions(i) for i in range(len(self._params))]
        self._parts, self._left = parts, len(parts) - 1
        return part

    def drop(self) -> None:
        self._parts, self._left, self._input, self._key = [], 0, None, ()


class PackedLinear(Linear):
    """An ``autocutlass.nn.Linear`` whose parameters view part ``index`` of a ``PackedGroup``'s
    packed tensors, computing its output together with its siblings' (see the module docstring).
    Same parameters and state_dict keys as the ``nn.Linear`` it was made from."""

    _group: PackedGroup
    _index: int
    _source: type[nn.Linear]

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        g, w, b = self._group, param(self, "weight"), param(self, "bias")
        if (_COMPILING() or not g.enabled or (w.data_ptr(), None if b is None else b.data_ptr()) != g.ptrs[self._index]
                or _GRAD() and (input.requires_grad or w.requires_grad or (b is not None and b.requires_grad))):
            return api.linear(input, w, b)  # tracing (first: no data pointers then), replaced or recording
        part = g.take(self._index, input)
        return part if part is not None else g.compute(self._index, input)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", packed={self._index + 1}/{len(self._group.sizes)}"


def _packable(members: list[nn.Module]) -> bool:
    if not all(type(m) in (nn.Linear, Linear) for m in members):
        return False
    first = members[0]
    assert isinstance(first, nn.Linear)
    w = first.weight
    return all(
        isinstance(m, nn.Linear) and m.in_features == first.in_features and m.weight.dtype == w.dtype
        and m.weight.device == w.device and (m.bias is None) == (first.bias is None)
        and m.weight.dim() == 2 and (m.bias is None or m.bias.dtype == w.dtype)
        for m in members
    ) and len({id(m) for m in members}) == len(members)  # fmt: skip


def _same_outputs(old: list[nn.Linear], new: list[PackedLinear]) -> bool:
    """Whether each packed sibling returns its original's output on a small random input (torch
    computing both), called in order with one input, as an attention calls them."""
    w = old[0].weight
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(3, old[0].in_features, generator=gen).to(device=w.device, dtype=w.dtype)
    tol = 1e-2 if w.dtype in (torch.bfloat16, torch.float16) else 1e-4
    try:
        with torch.no_grad(), policy("off"):
            want = [m(x) for m in old]
            got = [m(x) for m in new]
            return all(g.shape == y.shape and torch.allclose(g.float(), y.float(), rtol=tol,
                                                             atol=tol * (1 + float(y.float().abs().max())))
                       for g, y in zip(got, want, strict=True))  # fmt: skip
    except Exception:  # noqa: BLE001 - siblings that cannot run on a small input here (meta tensors, ...): not packed
        return False


def bind_checked(members: Sequence[nn.Linear], same: Callable[[PackedGroup], bool]) -> PackedGroup | None:
    """``members`` (of one dtype and device, all with or all without a bias) packed into a
    ``PackedGroup`` their parameters then view, if ``same(group)`` says the packed path computes
    what the unpacked one did; else None, with the parameters' own storage back."""
    saved = [(p, p.data) for m in members for p in (m.weight, m.bias) if p is not None]
    group = PackedGroup(members)
    group.bind(members)
    if not same(group):
        for param, data in saved:
            param.data = data
        return None
    group.drop()
    group._products = group._wasted = 0  # the check's product is not the model's
    return group


def pack(members: Sequence[nn.Linear]) -> list[PackedLinear] | None:
    """``PackedLinear`` siblings sharing ``members``' parameters, packed into one group (the
    parameters become views of the packed tensors); None, changing nothing, when they cannot be
    packed or the packed siblings do not compute the originals' outputs."""
    members = list(members)
    if not _packable(members):
        return None
    new: list[PackedLinear] = []

    def same(group: PackedGroup) -> bool:
        for i, m in enumerate(members):
            p = share_state(m, PackedLinear)
            p._group, p._index, p._source = group, i, type(m)
            new.append(p)
        return _same_outputs(members, new)

    return new if bind_checked(members, same) is not None else None


def swap_qkv_(model: nn.Module, groups: Sequence[Sequence[str]] = QKV, filter_fn: Filter | None = None) -> nn.Module:
    """Pack, in place, each group of sibling projections (children named as in one of ``groups``)
    of every module that ``filter_fn(module, fqn)`` accepts (default: all) into one GEMM (see the
    module docstring); returns ``model``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"autocutlass.swap_qkv_ expects a torch.nn.Module, got {type(model).__name__}")
    keep = filter_fn or (lambda m, fqn: True)
    swapped = 0
    for fqn, module in list(model.named_modules()):
        if not keep(module, fqn):
            continue
        for names in groups:
            members = [getattr(module, n, None) for n in names]
            if any(not isinstance(m, nn.Module) for m in members):
                continue
            new = pack(members)  # type: ignore[arg-type]
            if new is None:
                continue
            for n, m in zip(names, new, strict=True):
                setattr(module, n, m)
            swapped += len(new)
    warmup.after_swap(swapped)
    return model


def unswap_qkv_(model: nn.Module) -> nn.Module:
    """The inverse of ``swap_qkv_``: every ``PackedLinear`` becomes a module of the class it was
    made from, sharing its parameters (which keep viewing the packed storage); returns ``model``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"autocutlass.unswap_qkv_ expects a torch.nn.Module, got {type(model).__name__}")
    for fqn, module in list(model.named_modules(remove_duplicate=False)):
        if isinstance(module, PackedLinear) and fqn:
            parent_name, _, name = fqn.rpartition(".")
            plain = share_state(module, module._source)
            for attr in ("_group", "_index", "_source"):
                plain.__dict__.pop(attr, None)
            setattr(model.get_submodule(parent_name), name, plain)
    return model
