"""Whole models on autocutlass in one line: ``autocutlass.nn.Linear`` and ``Conv2d`` (subclasses of
torch's, with the same parameters and state_dict keys, whose forward runs autocutlass's entry
points), and in-place module swaps.

```python
model = autocutlass.swap_linear_(model)            # every servable nn.Linear, parameters shared
model = torch.compile(model)                       # traces torch.ops.autocutlass.* ops
autocutlass.unswap_linear_(model)                  # back to plain nn.Linear, parameters shared
model = autocutlass.swap_gated_mlp_(model)         # Llama-style MLPs: act(gate) * up in one epilogue
model = autocutlass.swap_qkv_(model)               # q/k/v projections of one input: one packed GEMM
model = autocutlass.swap_experts_(model)           # transformers MoE experts: autocutlass.grouped_mm
fused = autocutlass.nn.fuse_conv_bn(convnet.eval())  # inference: BatchNorm folded, add + act in the epilogue
```

Swaps replace modules whose type is exactly ``nn.Linear`` / ``nn.Conv2d`` (a subclass has its own
forward, which a swap would lose) and that ``filter_fn(module, fqn)`` accepts; the default filter
keeps the layers autocutlass can serve (``servable_linear``, ``servable_conv2d``). A module
reachable under several names (tied or shared) becomes one new module under all of them. The new
module reuses the old one's parameters, buffers and hooks: nothing is copied, and an optimizer
built before the swap keeps training the same tensors.
"""

from autocutlass.nn.experts import swap_experts_, unswap_experts_
from autocutlass.nn.fuse import FusedConv2d, fuse_conv_bn
from autocutlass.nn.gated import GatedMLP, swap_gated_mlp_, unswap_gated_mlp_
from autocutlass.nn.modules import Conv2d, Linear
from autocutlass.nn.packed import PackedLinear, swap_qkv_, unswap_qkv_
from autocutlass.nn.swap import (
    servable_conv2d,
    servable_linear,
    swap_conv2d_,
    swap_linear_,
    unswap_conv2d_,
    unswap_linear_,
)

__all__ = [
    "Conv2d",
    "FusedConv2d",
    "GatedMLP",
    "Linear",
    "PackedLinear",
    "fuse_conv_bn",
    "servable_conv2d",
    "servable_linear",
    "swap_conv2d_",
    "swap_experts_",
    "swap_gated_mlp_",
    "swap_linear_",
    "swap_qkv_",
    "unswap_conv2d_",
    "unswap_experts_",
    "unswap_gated_mlp_",
    "unswap_linear_",
    "unswap_qkv_",
]
