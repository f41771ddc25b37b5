"""Bad and unusual inputs, on the CPU path and on the fake-GPU planning path (``_dispatch_fakes``):
torch's exception types for invalid calls (never an AttributeError, ZeroDivisionError or
IndexError from inside the library), torch's results for valid but unusual ones (numpy-integer
conv arguments, an unbatched conv input, a bias that broadcasts), and no bias read past its end
by a kernel."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _dispatch_fakes import calls, make_rig
from torch import nn

import autocutlass as ac
from autocutlass.settings import Policy

BF = torch.bfloat16
CL = torch.channels_last


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:  # noqa: ANN001
    """A dispatcher of this test's own (its once-per-reason log lines stay out of later tests)."""
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    ac.reset()
    yield
    ac.reset()


def test_missing_operands_are_type_errors() -> None:
    w2, w4 = torch.randn(4, 4), torch.randn(4, 4, 1, 1)
    for f in (lambda: ac.matmul(None, w2), lambda: ac.linear(None, w2), lambda: ac.gemm(w2, None),
              lambda: ac.conv2d(None, w4), lambda: ac.conv2d(torch.randn(1, 4, 2, 2), None)):  # fmt: skip
        with pytest.raises(TypeError, match="must be a torch.Tensor"):
            f()


def test_numpy_integer_conv_arguments_work_as_in_torch() -> None:
    x, w = torch.randn(1, 8, 5, 5), torch.randn(16, 8, 3, 3)
    got = ac.conv2d(x, w, stride=np.int64(1), padding=np.int64(1), dilation=(np.int32(1), 1), groups=np.int64(1))
    torch.testing.assert_close(got, F.conv2d(x, w, stride=1, padding=1))
    m = nn.Conv2d(8, 16, np.int64(3), padding=np.int64(1))  # nn.Conv2d keeps the numpy integers
    model = ac.swap_conv2d_(nn.Sequential(m))
    torch.testing.assert_close(model(x), F.conv2d(x, m.weight, m.bias, padding=1))


@pytest.mark.parametrize(("kw", "needle"), [
    (dict(stride=0), "stride"), (dict(stride=(1, 0)), "stride"), (dict(dilation=0), "dilation"),
    (dict(padding=-1), "padding"), (dict(groups=0), "groups"),
])  # fmt: skip
def test_invalid_conv_geometry_raises_runtime_errors(kw: dict, needle: str) -> None:
    x, w = torch.randn(1, 8, 5, 5), torch.randn(16, 8, 3, 3)
    with pytest.raises(RuntimeError):
        F.conv2d(x, w, **kw)
    with pytest.raises(RuntimeError, match=needle):
        ac.conv2d(x, w, **kw)
    with pytest.raises(RuntimeError, match="4-D weight"):
        ac.conv2d(x, w[..., 0])


def test_a_conv_bias_of_the_wrong_size_is_an_error_on_every_path() -> None:
    """A kernel would read K values past a shorter bias: the call raises torch's error instead."""
    x = torch.randn(2, 32, 6, 6).to(BF).contiguous(memory_format=CL)
    w = torch.randn(48, 32, 1, 1).to(BF).contiguous(memory_format=CL)
    d = calls(make_rig(Policy.CACHED).dispatcher)
    for bias in (torch.randn(1).to(BF), torch.randn(31).to(BF)):
        with pytest.raises(RuntimeError, match="bias"):
            d.conv2d(x, w, bias)
        with pytest.raises(RuntimeError):
            ac.conv2d(x, w, bias)


def test_an_unbatched_conv_input_is_served_by_torch_on_a_gpu() -> None:
    rig = make_rig(Policy.CACHED)
    x = torch.randn(32, 6, 6).to(BF)
    w = torch.randn(48, 32, 1, 1).to(BF).contiguous(memory_format=CL)
    y = calls(rig.dispatcher).conv2d(x, w)
    assert rig.family.launches == [] and torch.equal(y, F.conv2d(x, w))


def test_a_broadcast_linear_bias_is_served_by_torch() -> None:
    """F.linear takes a (1,) bias (broadcast over N); the kernels read an (N,) vector."""
    rig = make_rig(Policy.CACHED)
    x, w, b = torch.randn(8, 32).to(BF), torch.randn(48, 32).to(BF), torch.randn(1).to(BF)
    y = calls(rig.dispatcher).linear(x, w, b)
    assert rig.family.launches == [] and torch.equal(y, F.linear(x, w, b))
    y = calls(rig.dispatcher).linear(x, w, torch.randn(48).to(BF))
    assert len(rig.family.launches) == 1 and y.shape == (8, 48)


def test_swapping_the_mlps_of_a_meta_model_leaves_them() -> None:
    """A model made on the meta device (no weights yet): nothing to check the swap on, nothing
    swapped, no error."""

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj, self.up_proj, self.down_proj = nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(16, 8)
            self.act_fn = nn.SiLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    with torch.device("meta"):
        model = nn.Sequential(MLP())
    assert type(ac.swap_gated_mlp_(model)[0]) is MLP
