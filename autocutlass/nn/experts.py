"""Mixture-of-experts layers of Hugging Face transformers on ``autocutlass.grouped_mm``.

transformers 5 keeps a MoE block's expert weights as 3-D parameters of one experts module
(``gate_up_proj`` (E, 2I, H), ``down_proj`` (E, H, I), or transposed) and picks the function that
computes them by name (``config._experts_implementation``: ``"eager"``, ``"grouped_mm"``, ...) from
its ``ExpertsInterface``. ``swap_experts_(model)`` registers ``experts_forward`` there as
``"autocutlass"`` and selects it for the model: one line, as ``swap_linear_`` is for dense layers.

``experts_forward`` sorts the (token, expert) pairs by expert, gathers their rows, runs the up (or
gate-up) projection and the down projection as two ``autocutlass.grouped_mm`` calls over the
experts' weights as they are (no copy; per-expert biases in the GEMM's epilogue), applies the
module's gate (``_apply_gate``: SiLU(gate) * up by default, gpt-oss's clamped gate) or activation
in between, weights each pair's row by its routing weight (float32 weights promote the product, as
in transformers' own ``"grouped_mm"`` function) and sums each token's pairs (torch's sum
accumulates 16-bit types in float32).
Offsets come from ``torch.histc`` on the device: nothing synchronises with the host. Differentiable
(grouped_mm's backward), and under ``torch.compile`` the GEMMs are ``torch.ops.autocutlass``
ops. Expert-parallel modules (``_is_expert_parallel``) run transformers' own ``"grouped_mm"``
function, logged once.

transformers is imported only by ``register_experts_backend`` and ``swap_experts_``;
``experts_forward`` needs only the module's attributes.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from autocutlass import api

log = logging.getLogger("autocutlass")

BACKEND = "autocutlass"
"""The name ``experts_forward`` is registered under in transformers' ``ExpertsInterface``."""

_PREVIOUS = "_autocutlass_previous_experts"
"""The attribute ``swap_experts_`` keeps the model's previous experts implementation in."""

_logged: set[str] = set()


def _log_once(reason: str) -> None:
    if reason not in _logged:
        _logged.add(reason)
        log.info("autocutlass: %s", reason)


def _weight(experts: nn.Module, name: str, transposed: bool) -> torch.Tensor:
    """The (E, K, N) operand of ``grouped_mm`` for the expert weight ``name``: the parameter
    itself when stored transposed (E, in, out), else the transposed view of its (E, out, in)."""
    w = getattr(experts, name)
    return w if transposed else w.transpose(-2, -1)


def _bias(experts: nn.Module, name: str, has_bias: bool | None, dtype: torch.dtype) -> torch.Tensor | None:
    """The (E, N) bias of projection ``name``, in the GEMM output's ``dtype`` (transformers adds it
    to that output in place), or None."""
    if has_bias is False:
        return None
    b = getattr(experts, f"{name}_bias", None)
    return b if b is None or b.dtype == dtype else b.to(dtype)


def _pair_weights(top_k_weights: torch.Tensor, top_k_index: torch.Tensor, tokens: int,
                  experts: int) -> torch.Tensor:  # fmt: skip
    """The routing weight of each (token, k) pair, flattened: from (T, k) weights (Qwen/Mixtral
    style) or gathered from (T, E) ones (DeepSeek-V2 style in transformers before 5.x's (T, k);
    with k == E the weights are read as (T, k), as transformers read them)."""
    k = top_k_index.shape[-1]
    if top_k_weights.shape == (tokens, k):
        return top_k_weights.reshape(-1)
    if top_k_weights.shape == (tokens, experts):
        return top_k_weights.gather(1, top_k_index).reshape(-1)
    raise ValueError(f"autocutlass experts: top_k_weights of shape {tuple(top_k_weights.shape)} is neither "
                     f"(tokens, top_k) = ({tokens}, {k}) nor (tokens, experts) = ({tokens}, {experts})")  # fmt: skip


def _offsets(sorted_ids: torch.Tensor, experts: int) -> torch.Tensor:
    """int32 cumulative row ends per expert of expert ids sorted ascending (ids past the last
    expert are not counted), computed on the ids' device without a host synchronisation."""
    ids = sorted_ids.float() if sorted_ids.device.type == "cpu" else sorted_ids.int()  # histc's dtypes
    counts = torch.histc(ids, bins=experts, min=0, max=experts - 1)
    return torch.cumsum(counts, dim=0, dtype=torch.int32)


def experts_forward(experts: nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                    top_k_weights: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """The experts module's output for ``hidden_states`` (T, H) routed to ``top_k_index`` (T, k)
    with ``top_k_weights`` (T, k) (or (T, E)): ``sum_j w[t, j] * expert_{idx[t, j]}(x[t])`` per
    token, through two ``autocutlass.grouped_mm`` calls (see the module docstring). Expert ids
    must lie in [0, E): checking them would synchronise with the host, so (as in transformers'
    functions) an id outside is not reported, and its pair's result is wrong or missing."""
    if getattr(experts, "_is_expert_parallel", False):
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

        _log_once("an expert-parallel experts module runs transformers' grouped_mm experts function")
        return ALL_EXPERTS_FUNCTIONS["grouped_mm"](experts, hidden_states, top_k_index, top_k_weights)
    if hidden_states.dim() != 2 or top_k_index.dim() != 2 or top_k_index.shape[0] != hidden_states.shape[0]:
        raise ValueError(f"autocutlass experts: hidden_states (tokens, hidden) and top_k_index (tokens, top_k) "
                         f"expected, got {tuple(hidden_states.shape)} and {tuple(top_k_index.shape)}")  # fmt: skip
    has_gate = getattr(experts, "has_gate", hasattr(experts, "gate_up_proj"))
    has_bias = getattr(experts, "has_bias", None)
    transposed = bool(getattr(experts, "is_transposed", getattr(experts, "experts_are_transposed", False)))
    up_name = "gate_up_proj" if has_gate else "up_proj"
    w_up, w_down = _weight(experts, up_name, transposed), _weight(experts, "down_proj", transposed)
    tokens, k = top_k_index.shape
    n_experts = w_up.shape[0]
    pair_w = _pair_weights(top_k_weights, top_k_index, tokens, n_experts)

    ids = top_k_index.reshape(-1)
    sorted_ids, perm = torch.sort(ids, stable=True)
    x = hidden_states[perm // k]
    if x.dtype != w_up.dtype:
        x = x.to(w_up.dtype)
    offs = _offsets(sorted_ids, n_experts)

    h = api.grouped_mm(x, w_up, offs, bias=_bias(experts, up_name, has_bias, x.dtype))
    if has_gate:
        h = experts._apply_gate(h) if hasattr(experts, "_apply_gate") else _silu_gate(experts, h)
    else:
        h = experts.act_fn(h)
    if h.dtype != w_down.dtype:
        h = h.to(w_down.dtype)
    y = api.grouped_mm(h, w_down, offs, bias=_bias(experts, "down_proj", has_bias, h.dtype))
    if getattr(experts, "has_post_expert_norm", False):
        y = experts.post_expert_norm(y)

    weighted = y * pair_w[perm].unsqueeze(-1)  # float32 routing weights promote, as in transformers
    # back to (token, k) order: perm is a permutation, so the scatter writes every row once
    unsorted = torch.empty_like(weighted)
    unsorted[perm] = weighted
    return unsorted.view(tokens, k, y.shape[-1]).sum(dim=1).to(hidden_states.dtype)


def _silu_gate(experts: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """``act(gate) * up`` of a [gate; up] concatenated projection (transformers' default gate)."""
    gate, up = h.chunk(2, dim=-1)
    return experts.act_fn(gate) * up


def register_experts_backend() -> str:
    """Register ``experts_forward`` in transformers' ``ExpertsInterface`` as ``"autocutlass"``
    (idempotent) and return that name, for ``from_pretrained(..., experts_implementation=...)`` or
    ``model.set_experts_implementation(...)``. Raises ImportError naming the need when transformers
    (>= 5, with the experts interface) is not installed."""
    try:
        from transformers.integrations.moe import ExpertsInterface
    except ImportError as e:
        raise ImportError("autocutlass experts backend: needs transformers >= 5 (its "
                          "transformers.integrations.moe.ExpertsInterface)") from e  # fmt: skip
    ExpertsInterface.register(BACKEND, experts_forward)
    return BACKEND


def swap_experts_(model: nn.Module) -> nn.Module:
    """Run ``model``'s mixture-of-experts layers (a transformers 5 ``PreTrainedModel`` whose
    experts modules use the experts interface) on ``experts_forward``, in place: registers the
    backend and selects it with ``model.set_experts_implementation``. ``unswap_experts_`` restores
    the implementation the model had. Raises TypeError for a model without
    ``set_experts_implementation``."""
    setter = getattr(model, "set_experts_implementation", None)
    if setter is None or not callable(getattr(model, "get_experts_implementation", None)):
        raise TypeError(f"swap_experts_ expects a transformers (>= 5) PreTrainedModel with "
                        f"set_experts_implementation, got {type(model).__name__}")  # fmt: skip
    name = register_experts_backend()
    previous = model.get_experts_implementation()
    if not hasattr(model, _PREVIOUS):
        object.__setattr__(model, _PREVIOUS, previous)
    setter(name)
    return model


def unswap_experts_(model: nn.Module) -> nn.Module:
    """Undo ``swap_experts_``: the experts implementation ``model`` had before (a no-op for a model
    never swapped)."""
    previous = getattr(model, _PREVIOUS, None)
    if previous is not None:
        model.set_experts_implementation(previous)
        object.__delattr__(model, _PREVIOUS)
    return model
