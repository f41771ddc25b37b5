"""Inference graphs with BatchNorm folded into the convolutions and the activations and residual
adds in their epilogues: ``fuse_conv_bn``.

A convnet in eager torch runs, per layer, a convolution, a BatchNorm pass, often a residual add
and an activation: each of the last three reads and writes the whole activation tensor. In eval
mode BatchNorm is an affine map per output channel, so it folds into the convolution's weight
and bias; the add and the activation are what ``autocutlass.conv2d``'s epilogue does
(``residual=``, ``activation=``). ``fuse_conv_bn(model)`` traces ``model`` with ``torch.fx`` and
rewrites every

    conv -> bn [-> add(other)] [-> act]          (act: ReLU, SiLU, GELU, tanh-GELU)

into one ``FusedConv2d``: the convolution with ``W' = W * g``, ``b' = (b - mean) * g + beta``
(``g = gamma / sqrt(var + eps)``, computed in float32 (float64 for float64 weights), stored in the conv weight's dtype and
memory format), the add as its residual and the activation as its epilogue's. A torchvision
ResNet's stem becomes conv+bias+ReLU, each bottleneck's last convolution conv+bias+residual+ReLU,
a downsample conv+bias.

Only what is certain is rewritten: the convolution's and the BatchNorm's outputs must have no
other use, the BatchNorm must track running statistics (``track_running_stats``) and be a
``BatchNorm2d`` over the convolution's output channels; an add fuses when it adds one other
tensor to the BatchNorm's output (``+``, ``+=``, ``torch.add`` without ``alpha``), an activation
when it is the only use of what precedes it. Everything else stays as it was.

The result is a new ``torch.fx.GraphModule`` for inference (the model itself is not changed; the
folded parameters are new tensors, so its state_dict differs from the model's). It runs under
``torch.no_grad`` or autograd alike, compiles with ``torch.compile``, and its convolutions are
``FusedConv2d`` modules (``autocutlass.nn.Conv2d`` subclasses) that ``autocutlass.conv2d`` serves.
``model`` must be in eval mode (folding uses the running statistics) and traceable by
``torch.fx.symbolic_trace``; otherwise a ``ValueError`` says why.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from autocutlass import api
from autocutlass.nn.modules import Conv2d
from autocutlass.ops.types import Activation
from autocutlass.torch_ops import apply_activation

_ACT_MODULES: dict[type[nn.Module], Activation] = {nn.ReLU: Activation.RELU, nn.SiLU: Activation.SILU}
_ACT_FUNCTIONS: dict[Any, Activation] = {
    F.relu: Activation.RELU, torch.relu: Activation.RELU, torch.relu_: Activation.RELU,
    F.silu: Activation.SILU, torch.nn.functional.gelu: Activation.GELU,
}  # fmt: skip
_ACT_METHODS = {"relu": Activation.RELU, "relu_": Activation.RELU}
_ADDS = (operator.add, operator.iadd, torch.add)


class FusedConv2d(Conv2d):
    """An ``autocutlass.nn.Conv2d`` (BatchNorm folded into its weight and bias) whose epilogue also
    applies ``activation`` and adds ``residual`` (before the activation):
    ``activation(conv2d(x, weight, bias) + residual)``. A residual of another shape than the
    output (one that broadcasts) is added by torch after the convolution."""

    activation: Activation = Activation.NONE

    def forward(self, input: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        act = None if self.activation is Activation.NONE else self.activation
        x, padding = input, self.padding
        if self.padding_mode != "zeros":
            x, padding = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), 0
        if residual is not None and tuple(residual.shape) != self._out_shape(x, padding):
            y = api.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)
            return apply_activation(y + residual, self.activation)
        return api.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups,
                          activation=act, residual=residual)  # fmt: skip

    def _out_shape(self, x: torch.Tensor, padding: Any) -> tuple[int, ...]:
        """The convolution's output shape for input ``x`` (what its residual must be to fuse)."""
        lead = (*x.shape[:-3], self.out_channels)
        if padding == "same":
            return (*lead, *x.shape[-2:])
        pads = (0, 0) if padding == "valid" else (padding, padding) if isinstance(padding, int) else padding
        return (*lead, *(
            (x.shape[-2 + i] + 2 * pads[i] - self.dilation[i] * (self.kernel_size[i] - 1) - 1) // self.stride[i] + 1
            for i in range(2)))  # fmt: skip

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation.value}"


def fold(conv: nn.Conv2d, bn: nn.BatchNorm2d, activation: Activation = Activation.NONE) -> FusedConv2d:
    """``conv`` followed by ``bn`` (eval: its running statistics) as one ``FusedConv2d`` with new
    parameters, in the conv weight's dtype, device and memory format (neither module is changed)."""
    assert bn.running_mean is not None and bn.running_var is not None
    w = conv.weight.detach()
    acc = torch.float64 if w.dtype is torch.float64 else torch.float32  # the arithmetic's precision
    scale = bn.running_var.detach().to(acc).add(bn.eps).rsqrt()
    if bn.weight is not None:
        scale = scale * bn.weight.detach().to(acc)
    shift = -bn.running_mean.detach().to(acc) * scale
    if bn.bias is not None:
        shift = shift + bn.bias.detach().to(acc)
    if conv.bias is not None:
        shift = shift + conv.bias.detach().to(acc) * scale
    channels_last = w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous()
    fused = FusedConv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,  # type: ignore[arg-type]
                        conv.dilation, conv.groups, True, conv.padding_mode, device="meta", dtype=w.dtype)  # fmt: skip
    new_w = (w.to(acc) * scale.reshape(-1, 1, 1, 1)).to(w.dtype)
    fused.weight = nn.Parameter(new_w.contiguous(memory_format=torch.channels_last if channels_last else
                                                 torch.contiguous_format), requires_grad=False)  # fmt: skip
    fused.bias = nn.Parameter(shift.to(w.dtype), requires_grad=False)
    fused.activation = activation
    fused.train(False)
    return fused


def _only_user(node: fx.Node) -> fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _activation(node: fx.Node, modules: dict[str, nn.Module]) -> Activation | None:
    if node.op == "call_module":
        m = modules.get(str(node.target))
        if type(m) in _ACT_MODULES:
            return _ACT_MODULES[type(m)]
        if type(m) is nn.GELU:
            return Activation.GELU_TANH if m.approximate == "tanh" else Activation.GELU  # type: ignore[union-attr]
        return None
    if node.op == "call_function" and node.target in _ACT_FUNCTIONS and len(node.args) == 1:
        if node.target is F.gelu and node.kwargs.get("approximate", "none") == "tanh":
            return Activation.GELU_TANH
        if set(node.kwargs) - {"inplace", "approximate"}:
            return None
        return _ACT_FUNCTIONS[node.target]
    if node.op == "call_method" and node.target in _ACT_METHODS and len(node.args) == 1 and not node.kwargs:
        return _ACT_METHODS[str(node.target)]
    return None


def _residual(add: fx.Node, of: fx.Node) -> fx.Node | None:
    """The other tensor ``add`` adds to ``of``, or None when ``add`` is not such an add."""
    is_add = (add.op == "call_function" and add.target in _ADDS) or (add.op == "call_method" and add.target in ("add", "add_"))
    if not is_add or len(add.args) != 2 or add.kwargs:
        return None
    a, b = add.args
    other = b if a is of else a if b is of else None
    return other if isinstance(other, fx.Node) and other is not of else None


def _set_module(gm: fx.GraphModule, target: str, module: nn.Module) -> None:
    parent_name, _, name = target.rpartition(".")
    setattr(gm.get_submodule(parent_name) if parent_name else gm, name, module)


def fuse_conv_bn(model: nn.Module) -> fx.GraphModule:
    """``model`` (eval) traced, with every conv -> BatchNorm [-> add] [-> activation] as one
    ``FusedConv2d``; see the module docstring."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"fuse_conv_bn expects a torch.nn.Module, got {type(model).__name__}")
    if model.training:
        raise ValueError("fuse_conv_bn folds BatchNorm's running statistics: call model.eval() first")
    try:
        gm = fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001 - any tracing failure: the model is not an fx graph
        raise ValueError(f"fuse_conv_bn: torch.fx cannot trace {type(model).__name__}: {type(e).__name__}: {e}") from e
    modules = dict(gm.named_modules())
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules.get(str(node.target)), nn.Conv2d):
            continue
        conv = modules[str(node.target)]
        assert isinstance(conv, nn.Conv2d)
        bn_node = _only_user(node)
        bn = modules.get(str(bn_node.target)) if bn_node is not None and bn_node.op == "call_module" else None
        if not (isinstance(bn, nn.BatchNorm2d) and bn.track_running_stats and bn.running_mean is not None
                and bn.num_features == conv.out_channels and bn_node is not None and bn_node.args == (node,)):  # fmt: skip
            continue
        pattern, last, residual, act = [node, bn_node], bn_node, None, Activation.NONE
        nxt = _only_user(last)
        if nxt is not None and (other := _residual(nxt, last)) is not None:
            pattern.append(nxt)
            last, residual = nxt, other
            nxt = _only_user(last)
        if nxt is not None and (found := _activation(nxt, modules)) is not None:
            pattern.append(nxt)
            last, act = nxt, found
        _set_module(gm, str(node.target), fold(conv, bn, act))
        with gm.graph.inserting_after(last):
            kwargs = {} if residual is None else {"residual": residual}
            fused = gm.graph.call_module(str(node.target), args=(node.args[0],), kwargs=kwargs)
        last.replace_all_uses_with(fused)
        for old in reversed(pattern):
            gm.graph.erase_node(old)
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm
