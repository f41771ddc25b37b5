"""``swap_gated_mlp_``: Llama-style MLPs (``down(act(gate(x)) * up(x))``) become ``GatedMLP``s that
compute the same through ``linear(..., mul=)``, with the same state_dict keys and shared
parameters, in inference and training; what only looks like one (another activation, the roles
of gate and up exchanged, mismatched projections) is left alone; ``unswap_gated_mlp_`` restores
the originals. CPU tensors: torch computes (the dispatcher's fallback)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autocutlass
from autocutlass.nn import GatedMLP, swap_gated_mlp_, unswap_gated_mlp_
from autocutlass.nn.gated import activation_of
from autocutlass.ops.types import Activation


class MLP(nn.Module):
    def __init__(self, act: nn.Module, *, bias: bool = False, swapped_roles: bool = False, inter: int = 40) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(16, inter, bias=bias)
        self.up_proj = nn.Linear(16, inter, bias=bias)
        self.down_proj = nn.Linear(inter, 16, bias=bias)
        self.act_fn = act
        self.swapped_roles = swapped_roles

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.swapped_roles:
            return self.down_proj(self.act_fn(self.up_proj(x)) * self.gate_proj(x))
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, mlp: nn.Module) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.mlp = mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class HFLikeSiLU(nn.Module):  # an activation class of another library
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(Layer(MLP(nn.SiLU())), Layer(MLP(HFLikeSiLU(), bias=True)),
                         Layer(MLP(nn.GELU(approximate="tanh"))), Layer(MLP(nn.Tanh())),
                         Layer(MLP(nn.SiLU(), swapped_roles=True)))  # fmt: skip


def test_gated_mlps_are_swapped_and_compute_the_same() -> None:
    model = _model()
    keys = list(model.state_dict())
    x = torch.randn(3, 5, 16)
    want = model(x)
    params = {n: p for n, p in model.named_parameters()}
    assert swap_gated_mlp_(model) is model
    kinds = [type(layer.mlp).__name__ for layer in model]
    assert kinds == ["GatedMLP", "GatedMLP", "GatedMLP", "MLP", "MLP"]  # Tanh; gate and up exchanged
    assert [layer.mlp.activation for layer in model[:3]] == [Activation.SILU, Activation.SILU, Activation.GELU_TANH]
    assert list(model.state_dict()) == keys
    assert all(p is params[n] for n, p in model.named_parameters())  # shared, not copied
    torch.testing.assert_close(model(x), want)


def test_training_through_a_swapped_mlp_matches() -> None:
    ref, model = _model(), _model()
    swap_gated_mlp_(model)
    x = torch.randn(4, 16)
    ref(x).square().mean().backward()
    model(x).square().mean().backward()
    for (name, p), pr in zip(model.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, pr.grad, msg=name)


def test_trainable_biases_of_frozen_weights_get_their_gradients() -> None:
    """BitFit-style training (weights frozen, biases trained) records through the Parameters: the
    packed call, which reads the packed tensors, would leave the biases without gradients."""
    torch.manual_seed(0)
    ref, ours = MLP(nn.SiLU(), bias=True), MLP(nn.SiLU(), bias=True)
    ours.load_state_dict(ref.state_dict())
    ours = swap_gated_mlp_(ours)
    for m in (ref, ours):
        for name, p in m.named_parameters():
            p.requires_grad_("bias" in name)
    x = torch.randn(4, 16)
    ref(x).square().mean().backward()
    ours(x).square().mean().backward()
    for name in ("gate_proj", "up_proj", "down_proj"):
        got, want = getattr(ours, name).bias.grad, getattr(ref, name).bias.grad
        assert got is not None and want is not None, name
        torch.testing.assert_close(got, want, msg=name)


def test_unswap_restores_the_original_modules() -> None:
    model = _model()
    originals = [layer.mlp for layer in model]
    swap_gated_mlp_(model)
    autocutlass.swap_linear_(model)  # projections swapped meanwhile: the originals get them
    unswap_gated_mlp_(model)
    assert [layer.mlp for layer in model] == originals
    assert isinstance(model[0].mlp.gate_proj, autocutlass.nn.Linear)


def test_the_root_and_a_shared_module() -> None:
    mlp = MLP(nn.SiLU())
    root = swap_gated_mlp_(mlp)
    assert isinstance(root, GatedMLP) and unswap_gated_mlp_(root) is mlp
    shared = MLP(nn.SiLU())
    model = nn.ModuleDict({"a": shared, "b": shared})
    swap_gated_mlp_(model)
    assert isinstance(model["a"], GatedMLP) and model["a"] is model["b"]


def test_filter_and_mismatched_projections() -> None:
    model = _model()
    swap_gated_mlp_(model, filter_fn=lambda m, fqn: fqn.startswith("0."))
    assert [type(layer.mlp).__name__ for layer in model][:2] == ["GatedMLP", "MLP"]
    odd = MLP(nn.SiLU())
    odd.up_proj = nn.Linear(16, 48, bias=False)
    assert GatedMLP.from_mlp(odd) is None


@pytest.mark.parametrize(("module", "act"), [
    (nn.SiLU(), Activation.SILU), (nn.GELU(), Activation.GELU), (nn.GELU(approximate="tanh"), Activation.GELU_TANH),
    (nn.ReLU(), Activation.RELU), (HFLikeSiLU(), Activation.SILU), (nn.Tanh(), None), (nn.Identity(), None),
    (nn.Mish(), None), ("silu", None)])  # fmt: skip
def test_activation_of(module: object, act: Activation | None) -> None:
    assert activation_of(module) is act


@pytest.mark.parametrize("swap", ["swap_linear_", "unswap_linear_", "swap_conv2d_", "unswap_conv2d_", "swap_gated_mlp_",
                                  "unswap_gated_mlp_"])  # fmt: skip
def test_a_swap_of_something_else_than_a_module_is_a_type_error(swap: str) -> None:
    with pytest.raises(TypeError, match="torch.nn.Module, got int"):
        getattr(autocutlass, swap)(5)
