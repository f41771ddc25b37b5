"""``autocutlass.nn.attrs``: the hot path's parameter and submodule look-ups return exactly what
the attribute does, for a parameter, one registered as None, a submodule, a parametrized weight
(a property of the module's class) and a plain tensor that replaced a deleted parameter."""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn.utils import parametrize

from autocutlass.nn.attrs import child, param


class Double(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return 2 * w


def test_param_and_child_are_the_attributes() -> None:
    m = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2, bias=False))
    lin, nobias = m[0], m[1]
    assert param(lin, "weight") is lin.weight and param(lin, "bias") is lin.bias
    assert param(nobias, "bias") is None and nobias.bias is None
    assert child(m, "0") is lin and child(m, "1") is nobias
    holder = nn.Module()
    holder.proj = lin
    holder.scale = 3.0  # not a parameter or module: the plain attribute
    assert child(holder, "proj") is lin and param(holder, "scale") == 3.0 and child(holder, "scale") == 3.0


def test_a_parametrized_weight_is_computed_as_the_attribute_is() -> None:
    lin = nn.Linear(4, 3)
    parametrize.register_parametrization(lin, "weight", Double())
    got = param(lin, "weight")
    assert torch.equal(got, lin.weight) and torch.equal(got, 2 * lin.parametrizations.weight.original)


def test_a_plain_tensor_that_replaced_a_parameter_is_returned() -> None:
    lin = nn.Linear(4, 3)
    del lin.weight
    lin.weight = torch.ones(3, 4)  # no longer a registered parameter: a plain attribute
    assert "weight" not in lin._parameters and param(lin, "weight") is lin.weight
