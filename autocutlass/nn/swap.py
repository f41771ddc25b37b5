"""In-place module swaps: ``swap_linear_`` / ``unswap_linear_`` and ``swap_conv2d_`` / ``unswap_conv2d_``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from autocutlass import warmup
from autocutlass.nn.modules import Conv2d, Linear

Filter = Callable[[nn.Module, str], bool]
"""``filter_fn(module, fqn) -> bool``: whether to swap ``module``, found under the dotted name ``fqn``
('' for the root)."""

SERVED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
"""Parameter dtypes autocutlass's kernels serve (float32 through TF32, when torch allows it)."""

FEATURE_MULTIPLE = 8
"""Features (in and out) must be multiples of this: 16-byte rows for 16-bit types, which TMA
needs (for float32, a multiple of 4 would do; the default keeps one rule)."""

MAX_CONV_STRIDE = 8
"""The im2col TMA's largest traversal stride (``kernels.hopper_conv.check``)."""

MAX_UNFOLDED_CHANNELS = 256
"""A layer whose input channels are not a multiple of 8 (an image model's 3-channel stem) is served
through its row-unfolded input when its filter width times its channels, rounded up to 8, is at most
this (``kernels.hopper_conv_unfold.lowering.MAX_UNFOLDED_CHANNELS``)."""


def servable_linear(module: nn.Module, fqn: str = "") -> bool:
    """The default filter of ``swap_linear_``: a weight of a served dtype and in/out features that
    are multiples of 8. (Layers it skips would run torch anyway, through one more call.)"""
    w = getattr(module, "weight", None)
    return (
        isinstance(w, torch.Tensor) and w.dtype in SERVED_DTYPES and w.dim() == 2
        and w.shape[0] % FEATURE_MULTIPLE == 0 and w.shape[1] % FEATURE_MULTIPLE == 0
    )  # fmt: skip


def servable_conv2d(module: nn.Module, fqn: str = "") -> bool:
    """The default filter of ``swap_conv2d_``: the layers the conv families can serve, judged from
    the layer alone: dense (one group), zero padding, a served dtype, input and output channel
    counts that are multiples of 8 (whole 16-byte TMA units for 16-bit types) and strides of at most
    8 (the im2col TMA's traversal limit). What depends on the input (its memory format, alignment,
    the im2col corner limits for a given padding) is decided per call: such a call runs ``F.conv2d``
    with one logged reason per fingerprint. A layer whose input channels are not a multiple of 8 (the
    3-channel stem of an image model) is swapped when its row-unfolded input has at most
    ``MAX_UNFOLDED_CHANNELS`` channels (its forward and weight gradient run on the unfolded
    convolution families; its input gradient on cuDNN)."""
    if not isinstance(module, nn.Conv2d):
        return False
    w = module.weight
    return (
        w.dtype in SERVED_DTYPES and module.groups == 1 and module.padding_mode == "zeros"
        and all(s <= MAX_CONV_STRIDE for s in module.stride)
        and _servable_in_channels(module.in_channels, module.kernel_size[1])
        and module.out_channels % FEATURE_MULTIPLE == 0
    )  # fmt: skip


def _servable_in_channels(c: int, s: int) -> bool:
    """Whole 16-byte channel rows, or a row-unfolded input of at most ``MAX_UNFOLDED_CHANNELS``."""
    return c % FEATURE_MULTIPLE == 0 or -(-(c * s) // FEATURE_MULTIPLE) * FEATURE_MULTIPLE <= MAX_UNFOLDED_CHANNELS


def _swapped(result: tuple[nn.Module, int]) -> nn.Module:
    """The root of a swap, after starting the tuning processes when it swapped a layer
    (``autocutlass.prewarm``: only under the tuning policies, with a served GPU)."""
    root, swapped = result
    warmup.after_swap(swapped)
    return root


def _replace(model: nn.Module, source: type[nn.Module], keep: Filter, make: Callable[[nn.Module], nn.Module]
             ) -> tuple[nn.Module, int]:  # fmt: skip
    """Replace every module of exactly type ``source`` that ``keep`` accepts by ``make(module)``,
    under every name it is reachable by; returns the root (new when the root itself is replaced)
    and how many modules were replaced."""
    return replace_modules(model, lambda m: type(m) is source, lambda m, fqn: make(m) if keep(m, fqn) else None)


def replace_modules(model: nn.Module, match: Callable[[nn.Module], bool],
                    make: Callable[[nn.Module, str], nn.Module | None]) -> tuple[nn.Module, int]:  # fmt: skip
    """Replace every module ``match`` accepts by ``make(module, fqn)`` (None: keep it), under every
    name it is reachable by (``make`` runs once per module, under its first name); returns the root
    (new when the root itself is replaced) and how many modules were replaced."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"autocutlass: a module swap expects a torch.nn.Module, got {type(model).__name__}")
    made: dict[int, nn.Module | None] = {}
    places: list[tuple[nn.Module | None, str, nn.Module]] = []
    for fqn, module in model.named_modules(remove_duplicate=False):
        if not match(module):
            continue
        if id(module) not in made:
            made[id(module)] = make(module, fqn)
        parent_name, _, name = fqn.rpartition(".")
        places.append((model.get_submodule(parent_name) if fqn else None, name, module))
    root = model
    for parent, name, module in places:
        new = made.get(id(module))
        if new is None:
            continue
        if parent is None:
            root = new
        else:
            setattr(parent, name, new)
    return root, sum(1 for m in made.values() if m is not None)


def swap_linear_(model: nn.Module, filter_fn: Filter | None = None) -> nn.Module:
    """Replace, in place, every ``nn.Linear`` of ``model`` that ``filter_fn(module, fqn)`` accepts
    (default ``servable_linear``) by an ``autocutlass.nn.Linear`` sharing its parameters; returns
    ``model`` (or the new module when ``model`` itself is a swapped ``nn.Linear``)."""
    return _swapped(_replace(model, nn.Linear, filter_fn or servable_linear, Linear.from_linear))


def unswap_linear_(model: nn.Module) -> nn.Module:
    """The inverse of ``swap_linear_``: every ``autocutlass.nn.Linear`` becomes an ``nn.Linear``
    sharing its parameters; returns ``model`` (or the new root)."""
    return _replace(model, Linear, lambda m, fqn: True, lambda m: m.to_linear())[0]  # type: ignore[attr-defined]


def swap_conv2d_(model: nn.Module, filter_fn: Filter | None = None) -> nn.Module:
    """Replace, in place, every ``nn.Conv2d`` that ``filter_fn`` accepts (default
    ``servable_conv2d``: dense convolutions with channel counts that are multiples of 8) by an ``autocutlass.nn.Conv2d``
    sharing its parameters; returns ``model`` (or the new root). Inputs must be channels_last
    (``model.to(memory_format=torch.channels_last)`` and the same for the input) to be served."""
    return _swapped(_replace(model, nn.Conv2d, filter_fn or servable_conv2d, Conv2d.from_conv2d))


def unswap_conv2d_(model: nn.Module) -> nn.Module:
    """The inverse of ``swap_conv2d_``."""
    return _replace(model, Conv2d, lambda m, fqn: True, lambda m: m.to_conv2d())[0]  # type: ignore[attr-defined]
