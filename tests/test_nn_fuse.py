"""``autocutlass.nn.fuse_conv_bn``: an eval convnet traced with BatchNorm folded into its convolutions
and the residual adds and activations that follow in their epilogues. Outputs equal the model's
(float64 to rounding, bf16 channels_last within bf16's tolerance), every fusable pattern fused
(ResNet stem, bottleneck, downsample; functional, method and module activations; adds written
either way), what cannot be proven fusable left alone (BatchNorm without running statistics, a
conv or BatchNorm output used twice), a broadcast residual still right, the model itself unchanged;
errors for training mode and untraceable models; the fused epilogue reaches the kernel layer
(fake family: a pointwise conv's launch carries bias, residual and activation)."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F
from _dispatch_fakes import make_rig
from torch import nn
from torch._dynamo.utils import counters

import autocutlass
from autocutlass import api
from autocutlass.nn import FusedConv2d, fuse_conv_bn
from autocutlass.ops.types import Activation
from autocutlass.settings import Policy

F64 = torch.float64
CL = torch.channels_last


def _randomise_bn(model: nn.Module) -> nn.Module:
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d) and m.running_mean is not None:
            with torch.no_grad():
                m.running_mean.copy_(torch.rand(m.num_features, generator=gen) * 2 - 1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 1.5 + 0.5)
                if m.weight is not None:
                    m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                    m.bias.copy_(torch.rand(m.num_features, generator=gen) - 0.5)
    return model


class Bottleneck(nn.Module):  # as torchvision writes it
    def __init__(self, cin: int, mid: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu = nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True)
        self.layer = nn.Sequential(Bottleneck(16, 8, 32, 2), Bottleneck(32, 8, 32))
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _fused(gm: nn.Module) -> dict[str, Activation]:
    return {n: m.activation for n, m in gm.named_modules() if isinstance(m, FusedConv2d)}


def test_a_resnet_folds_and_fuses_and_computes_the_same() -> None:
    torch.manual_seed(0)
    model = _randomise_bn(Net()).to(F64).eval()
    x = torch.randn(2, 3, 32, 32, dtype=F64)
    want = model(x)
    gm = fuse_conv_bn(model)
    torch.testing.assert_close(gm(x), want, rtol=1e-10, atol=1e-12)
    relu = Activation.RELU
    assert _fused(gm) == {"conv1": relu, "layer.0.conv1": relu, "layer.0.conv2": relu, "layer.0.conv3": relu,
                          "layer.0.downsample.0": Activation.NONE, "layer.1.conv1": relu, "layer.1.conv2": relu,
                          "layer.1.conv3": relu}  # fmt: skip
    assert not any(isinstance(m, nn.BatchNorm2d) for m in gm.modules())
    residual_calls = [n for n in gm.graph.nodes if n.op == "call_module" and "residual" in n.kwargs]
    assert [str(n.target) for n in residual_calls] == ["layer.0.conv3", "layer.1.conv3"]
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == 8  # the model is untouched
    torch.testing.assert_close(model(x), want)


def test_bf16_channels_last_weights_stay_so() -> None:
    torch.manual_seed(0)
    model = _randomise_bn(Net()).to(torch.bfloat16).to(memory_format=CL).eval()
    x = torch.randn(2, 3, 32, 32).to(torch.bfloat16).contiguous(memory_format=CL)
    gm = fuse_conv_bn(model)
    for m in gm.modules():
        if isinstance(m, FusedConv2d):
            assert m.weight.dtype is torch.bfloat16 and m.bias.dtype is torch.bfloat16
            assert m.weight.is_contiguous(memory_format=CL) and not m.weight.requires_grad
    torch.testing.assert_close(gm(x).float(), model(x).float(), rtol=0.05, atol=0.05)


class Variants(nn.Module):
    """Every activation spelling, adds written either way, and what must not fuse."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.ModuleList(nn.Conv2d(8, 8, 3, padding=1) for _ in range(9))
        self.b = nn.ModuleList(nn.BatchNorm2d(8) for _ in range(9))
        self.b[7] = nn.BatchNorm2d(8, track_running_stats=False)  # batch statistics: not foldable
        self.silu, self.gelu = nn.SiLU(), nn.GELU(approximate="tanh")
        self.reflect = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")
        self.rb = nn.BatchNorm2d(8)
        self.shift = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c, b = self.c, self.b
        y = F.relu(b[0](c[0](x)))
        y = torch.relu(b[1](c[1](y)))
        y = b[2](c[2](y)).relu()
        y = self.silu(b[3](c[3](y)))
        y = self.gelu(x + b[4](c[4](y)))  # the residual first
        y = F.gelu(torch.add(b[5](c[5](y)), x))
        z = c[6](y)
        y = b[6](z) + z  # the conv's output used twice: not folded
        y = F.relu(b[7](c[7](y)))
        y = F.relu(b[8](c[8](y)) + self.shift)  # a broadcast residual
        return F.relu(self.rb(self.reflect(y)))


def test_every_spelling_fuses_and_what_cannot_be_proven_stays() -> None:
    torch.manual_seed(0)
    model = _randomise_bn(Variants()).to(F64).eval()
    x = torch.randn(2, 8, 9, 9, dtype=F64)
    gm = fuse_conv_bn(model)
    torch.testing.assert_close(gm(x), model(x), rtol=1e-10, atol=1e-12)
    A = Activation
    assert _fused(gm) == {"c.0": A.RELU, "c.1": A.RELU, "c.2": A.RELU, "c.3": A.SILU, "c.4": A.GELU_TANH,
                          "c.5": A.GELU, "c.8": A.RELU, "reflect": A.RELU}  # fmt: skip
    assert {n for n, m in gm.named_modules() if isinstance(m, nn.BatchNorm2d)} == {"b.6", "b.7"}


def test_a_batchnorm_output_used_twice_folds_without_the_rest() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn(self.conv(x))
            return F.relu(y) + y

    model = _randomise_bn(Twice()).to(F64).eval()
    x = torch.randn(1, 4, 5, 5, dtype=F64)
    gm = fuse_conv_bn(model)
    assert _fused(gm) == {"conv": Activation.NONE}
    torch.testing.assert_close(gm(x), model(x))
    assert any(n.op == "call_function" and n.target is operator.add for n in gm.graph.nodes)


def test_training_mode_and_untraceable_models_are_refused() -> None:
    with pytest.raises(ValueError, match=r"model.eval\(\)"):
        fuse_conv_bn(Net())

    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x) if x.sum() > 0 else x

    with pytest.raises(ValueError, match="torch.fx cannot trace Branchy"):
        fuse_conv_bn(Branchy().eval())


def test_the_fused_graph_compiles_whole() -> None:
    model = _randomise_bn(Net()).eval()
    gm = fuse_conv_bn(model)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        y = torch.compile(gm, backend="aot_eager", fullgraph=True)(x)
    assert not counters["graph_break"]
    torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)


def test_the_kernel_layer_gets_bias_residual_and_activation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pointwise conv (the fake family serves it as a GEMM) after folding: one launch whose
    epilogue adds the bias and the residual and applies the ReLU."""

    class Pointwise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn, self.relu = nn.Conv2d(32, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.relu(self.bn(self.conv(x)) + x)

    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    model = _randomise_bn(Pointwise()).to(torch.bfloat16).to(memory_format=CL).eval()
    x = torch.randn(2, 32, 4, 6).to(torch.bfloat16).contiguous(memory_format=CL)
    with torch.no_grad():
        y = fuse_conv_bn(model)(x)
    (launch,) = rig.family.launches
    ep = launch.problem.epilogue
    assert ep.bias and ep.with_c and not ep.c_mul and ep.activation is Activation.RELU
    assert rig.dispatcher.stats().fallbacks == 0
    torch.testing.assert_close(y.float(), model(x).float(), rtol=0.05, atol=0.1)


def test_fusing_something_else_than_a_module_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="torch.nn.Module, got list"):
        fuse_conv_bn([nn.Conv2d(3, 3, 1)])  # type: ignore[arg-type]
