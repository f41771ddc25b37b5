"""``Linear`` and ``Conv2d``: torch's modules with forwards through ``autocutlass.linear`` and
``autocutlass.conv2d``."""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from autocutlass import api
from autocutlass.nn.attrs import param
from autocutlass.nn.conv_site import ConvHits
from autocutlass.nn.hits import LinearHits

_COMPILING = torch.compiler.is_compiling

_M = TypeVar("_M", bound=nn.Module)


def share_state(src: nn.Module, cls: type[_M]) -> _M:
    """A module of class ``cls`` holding ``src``'s state: the same parameters, buffers, submodules
    and hooks (the containers are new, the tensors and callables in them are ``src``'s), its
    attributes (features, stride, ...) and its training flag. Nothing is copied or allocated."""
    new = cls.__new__(cls)
    new.__dict__.update({k: (v.copy() if isinstance(v, dict) else v) for k, v in src.__dict__.items()
                         if k != "_ac_hits"})  # the hit cache is the module's own (nn.hits)
    return new


class Linear(nn.Linear):
    """``nn.Linear`` whose forward is ``autocutlass.linear(input, weight, bias)``: the same
    parameters and state_dict keys, made and initialised as ``nn.Linear`` is. Differentiable;
    under torch.compile its GEMM is ``torch.ops.autocutlass.linear``. Eager inference calls run
    the entry the last call ran while nothing that decides it changed (``autocutlass.nn.hits``)."""

    _ac_hits: LinearHits | None = None
    """This module's hit cache (``autocutlass.nn.hits``), made on its first eager call."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if _COMPILING():
            return api.linear(input, self.weight, self.bias)
        hits = self._ac_hits
        if hits is None:
            hits = LinearHits()
            object.__setattr__(self, "_ac_hits", hits)  # not a submodule, parameter or buffer
        return hits.linear(input, param(self, "weight"), param(self, "bias"))

    @classmethod
    def from_linear(cls, m: nn.Linear) -> Linear:
        """An ``autocutlass.nn.Linear`` reusing ``m``'s parameters (no copy); see ``share_state``."""
        if not isinstance(m, nn.Linear):
            raise TypeError(f"from_linear expects an nn.Linear, got {type(m).__name__}")
        return share_state(m, cls)

    def to_linear(self) -> nn.Linear:
        """A plain ``nn.Linear`` reusing this module's parameters (the inverse of ``from_linear``)."""
        return share_state(self, nn.Linear)


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` whose forward is ``autocutlass.conv2d(...)`` (padding modes other than 'zeros'
    pad first, as ``nn.Conv2d`` does): the same parameters and state_dict keys. autocutlass
    serves channels_last bf16/fp16 convolutions (pointwise ones as GEMMs, the others with its
    implicit-GEMM kernels) and runs ``F.conv2d`` for the others; differentiable (dgrad and wgrad
    are autocutlass calls of their own: ``autocutlass.conv2d``'s backward)."""

    _ac_hits: ConvHits | None = None
    """This module's conv site (``autocutlass.nn.conv_site``), made on its first eager call."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        w, b = param(self, "weight"), param(self, "bias")
        x, padding = input, self.padding
        if self.padding_mode != "zeros":
            x, padding = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), (0, 0)
        if _COMPILING():
            return api.conv2d(x, w, b, self.stride, padding, self.dilation, self.groups)
        hits = self._ac_hits
        if hits is None:
            hits = ConvHits()
            object.__setattr__(self, "_ac_hits", hits)  # not a submodule, parameter or buffer
        return hits.conv2d(x, w, b, self.stride, padding, self.dilation, self.groups)

    @classmethod
    def from_conv2d(cls, m: nn.Conv2d) -> Conv2d:
        """An ``autocutlass.nn.Conv2d`` reusing ``m``'s parameters (no copy)."""
        if not isinstance(m, nn.Conv2d):
            raise TypeError(f"from_conv2d expects an nn.Conv2d, got {type(m).__name__}")
        return share_state(m, cls)

    def to_conv2d(self) -> nn.Conv2d:
        """A plain ``nn.Conv2d`` reusing this module's parameters."""
        return share_state(self, nn.Conv2d)
