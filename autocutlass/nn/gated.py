"""Gated MLPs on autocutlass: ``GatedMLP`` and ``swap_gated_mlp_`` / ``unswap_gated_mlp_``.

The MLP of Llama, Mistral, Qwen2/3 and Gemma models computes ``down(act(gate(x)) * up(x))``
with three ``nn.Linear`` children named ``gate_proj``, ``up_proj`` and ``down_proj`` and an
activation module ``act_fn``. ``GatedMLP`` computes the same with two autocutlass calls and the
down projection::

    h = autocutlass.linear(x, gate.weight, gate.bias, activation=act, mul=autocutlass.linear(x, up.weight, up.bias))
    return down_proj(h)

so the activation and the product happen in the gate projection's epilogue (the
``hopper_gemm_gated`` kernels, unless ``AUTOCUTLASS_GATED_KERNELS=0``, when torch computes
``act(F.linear(...)) * up``) instead of two passes over the (tokens, intermediate) tensors.

**SwiGLU packing** (a SiLU MLP, unless ``AUTOCUTLASS_SWIGLU_KERNELS=0`` at swap time): the gate
and up weights (and biases) are packed once into one (2I, H) tensor, gate rows first, and the
projections' parameters become views of its two halves (``param.data``: the same ``Parameter``
objects, state_dict keys and values, optimizers and in-place updates see one storage). Inference
then runs ``autocutlass.linear(x, packed, activation="swiglu")``, one GEMM whose epilogue pairs
gate and up columns (the ``hopper_gemm_swiglu`` kernels), then ``down_proj``. Memory: no second
copy is kept (the packed tensor is the weights' storage); the swap briefly holds both (one extra
gate + up weight per MLP while it copies). Nothing stale is served: each forward checks that the
parameters are still those views (a ``load_state_dict(assign=True)``, a ``.to()`` or a
``param.data = ...`` after the swap replaces them) and otherwise, and whenever autograd records
(the gradients must reach the two parameters), runs the two-GEMM path above.

``swap_gated_mlp_(model)`` replaces, in place, every module shaped like that: ``gate_proj`` and
``up_proj`` ``nn.Linear`` of the same shape, a ``down_proj`` ``nn.Linear`` (or ``autocutlass.nn``
ones), and an ``act_fn`` that computes one of autocutlass's activations (found by evaluating it
on a probe: SiLU, GELU, tanh-approximated GELU, ReLU, whatever class implements it). Before it
replaces a module it checks, on a small random input in the module's dtype and device with
policy ``off`` (torch computes; nothing is tuned), that the new module's output equals the old
one's: a module that computes something else under those names is left alone. The children are
shared, not copied: state_dict keys, parameters and hooks on the projections stay; hooks on the
MLP module itself do not carry over. ``unswap_gated_mlp_`` puts the original modules back.
"""

from __future__ import annotations


import torch
from torch import nn

from autocutlass import api, settings, warmup
from autocutlass.dispatch import policy
from autocutlass.nn.attrs import child, param
from autocutlass.nn.packed import PackedGroup, bind_checked
from autocutlass.nn.swap import Filter, replace_modules
from autocutlass.ops.types import Activation
from autocutlass.torch_ops import apply_activation

_PROBE = torch.linspace(-6.0, 6.0, 97)
_CANDIDATES = (Activation.SILU, Activation.GELU, Activation.GELU_TANH, Activation.RELU)


def activation_of(act_fn: object) -> Activation | None:
    """The activation ``act_fn`` computes (evaluated on a float32 probe over [-6, 6]), or None."""
    if not callable(act_fn):
        return None
    try:
        with torch.no_grad():
            got = act_fn(_PROBE.clone())
    except Exception:  # noqa: BLE001 - an activation that cannot take a CPU float32 tensor: not ours
        return None
    if not isinstance(got, torch.Tensor) or got.shape != _PROBE.shape:
        return None
    for act in _CANDIDATES:
        if torch.allclose(got.float(), apply_activation(_PROBE, act), rtol=1e-5, atol=1e-6):
            return act
    return None


def _records(x: torch.Tensor, *linears: nn.Module) -> bool:
    """Whether autograd records a call on ``x`` with these Linears: ``x`` or any of their weights or
    biases requires grad (a packed call reads the packed tensors, not the Parameters: their
    gradients would be lost)."""
    if x.requires_grad:
        return True
    for m in linears:
        w, b = param(m, "weight"), param(m, "bias")
        if w.requires_grad or (b is not None and b.requires_grad):
            return True
    return False


class GatedMLP(nn.Module):
    """``down_proj(act(gate_proj(x)) * up_proj(x))`` with the activation and the product in the gate
    projection's epilogue (``autocutlass.linear(..., mul=)``). Holds the original module's three
    projections (shared) and the original module itself (for ``unswap_gated_mlp_``)."""

    def __init__(self, gate_proj: nn.Linear, up_proj: nn.Linear, down_proj: nn.Module, activation: Activation,
                 original: nn.Module | None = None) -> None:  # fmt: skip
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = gate_proj, up_proj, down_proj
        self.activation = activation
        self._original = (original,)  # a tuple: not a submodule (no second copy of the keys)

        self._group: PackedGroup | None = None
        """The packed gate and up weights (``autocutlass.nn.packed``) whose parts the two
        parameters view, with the packed SwiGLU call's hit cache."""

    @property
    def _packed(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """(weight (2I, H), bias (2I,) or None) of the packing, if packed."""
        group = self._group
        return None if group is None else (group.weight, group.bias)

    def _packed_views(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """The packed (weight, bias) while the parameters still view it, else None."""
        group = self._group
        # False once a parameter was replaced since the packing
        if group is None or not group.bound((child(self, "gate_proj"), child(self, "up_proj"))):
            return None
        return group.weight, group.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # under torch.compile the unpacked form (Dynamo cannot compare data pointers)
        packed = None if torch.compiler.is_compiling() else self._packed_views()
        if packed is not None and not (torch.is_grad_enabled() and _records(x, child(self, "gate_proj"),
                                                                            child(self, "up_proj"))):  # fmt: skip
            h = self._group.hits.linear(x, packed[0], packed[1], "swiglu")  # type: ignore[union-attr]
            return child(self, "down_proj")(h)
        up = api.linear(x, self.up_proj.weight, self.up_proj.bias)
        h = api.linear(x, self.gate_proj.weight, self.gate_proj.bias, activation=self.activation, mul=up)
        return self.down_proj(h)

    def extra_repr(self) -> str:
        return f"activation={self.activation.value}" + (", packed=swiglu" if self._packed is not None else "")

    @classmethod
    def from_mlp(cls, mlp: nn.Module) -> GatedMLP | None:
        """A ``GatedMLP`` sharing ``mlp``'s projections, or None when ``mlp`` is not a gated MLP
        (see the module docstring) or computes something else."""
        gate, up, down = (getattr(mlp, n, None) for n in ("gate_proj", "up_proj", "down_proj"))
        if not all(isinstance(p, nn.Linear) for p in (gate, up, down)):
            return None
        assert isinstance(gate, nn.Linear) and isinstance(up, nn.Linear) and isinstance(down, nn.Linear)
        if gate.weight.shape != up.weight.shape or (gate.bias is None) != (up.bias is None):
            return None
        if down.in_features != gate.out_features:
            return None
        act = activation_of(getattr(mlp, "act_fn", None))
        if act is None:
            return None
        new = cls(gate, up, down, act, mlp)
        new.train(mlp.training)
        if not _same_output(mlp, new, gate):
            return None
        if act is Activation.SILU and settings.current().swiglu_kernels:
            _pack_checked(mlp, new, gate, up)
        return new


def _pack_checked(old: nn.Module, new: GatedMLP, gate: nn.Linear, up: nn.Linear) -> bool:
    """Pack ``new``'s gate and up weights (``packed.bind_checked``) when it is a SiLU MLP of one
    dtype and device, kept only if the packed path computes ``old``'s output too; whether it
    packed."""
    if (new.activation is not Activation.SILU or gate.weight.dtype != up.weight.dtype
            or gate.weight.device != up.weight.device):  # fmt: skip
        return False

    def same(group: PackedGroup) -> bool:
        new._group = group
        if _same_output(old, new, gate):
            return True
        new._group = None
        return False

    return bind_checked([gate, up], same) is not None


def _same_output(old: nn.Module, new: GatedMLP, gate: nn.Linear) -> bool:
    """Whether ``new`` computes ``old``'s output on a small random input (torch computing both)."""
    w = gate.weight
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(2, gate.in_features, generator=gen).to(device=w.device, dtype=w.dtype)
    tol = 1e-2 if w.dtype in (torch.bfloat16, torch.float16) else 1e-4
    try:
        with torch.no_grad(), policy("off"):
            want, got = old(x), new(x)
            if not isinstance(want, torch.Tensor) or want.shape != got.shape:
                return False
            return bool(torch.allclose(got.float(), want.float(), rtol=tol,
                                       atol=tol * (1 + float(want.float().abs().max()))))  # fmt: skip
    except Exception:  # noqa: BLE001 - a forward that does not take (tokens, features), meta tensors: not swapped
        return False


def swap_gated_mlp_(model: nn.Module, filter_fn: Filter | None = None) -> nn.Module:
    """Replace, in place, every gated MLP of ``model`` that ``filter_fn(module, fqn)`` accepts
    (default: all) by a ``GatedMLP`` sharing its projections; returns ``model`` (or the new root
    when ``model`` itself is one). Modules that are not gated MLPs are left as they are."""
    keep = filter_fn or (lambda m, fqn: True)

    def match(module: nn.Module) -> bool:
        return not isinstance(module, GatedMLP) and all(hasattr(module, n) for n in ("gate_proj", "up_proj", "down_proj"))

    root, swapped = replace_modules(model, match, lambda m, fqn: GatedMLP.from_mlp(m) if keep(m, fqn) else None)
    warmup.after_swap(swapped)  # as the other swaps: start the tuning processes (tuning policies only)
    return root


def unswap_gated_mlp_(model: nn.Module) -> nn.Module:
    """The inverse of ``swap_gated_mlp_``: every ``GatedMLP`` made by it becomes its original module
    again (which shares the projections, including any swapped since); returns ``model`` (or the
    original root)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"autocutlass.unswap_gated_mlp_ expects a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, GatedMLP) and model._original[0] is not None:
        return model._original[0]
    for fqn, module in list(model.named_modules(remove_duplicate=False)):
        if isinstance(module, GatedMLP) and module._original[0] is not None and fqn:
            parent_name, _, name = fqn.rpartition(".")
            original = module._original[0]
            for attr in ("gate_proj", "up_proj", "down_proj"):  # projections swapped since: keep them
                setattr(original, attr, getattr(module, attr))
            setattr(model.get_submodule(parent_name), name, original)
    return model
