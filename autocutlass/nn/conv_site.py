"""``ConvHits``: one ``autocutlass.nn.Conv2d``'s last forward signature and what serves it, so that
the next eager call of the same signature skips the dispatcher, and a convolution that torch serves
in every direction runs as ``nn.Conv2d`` does.

A convnet's training step calls each conv module once per step with the same input shape, weight
and settings. Through ``autocutlass.conv2d`` every such call builds the forward's memo key (about
twenty fields of tensor metadata), an autograd Function, and in the backward the dgrad's and the
wgrad's memo keys. On an H100 a ResNet-50 b128 step on autocutlass spent 34.1 ms of host time
against torch's 23.7, a UNet-style block stack b8 16.2 ms against 9.6, with the GPU's kernel time
at parity or near it: the steps were host-bound
(``benchmarks/results/2026-11-27-h100-s19-conv-train-host-*-before.txt``). With the sites, a
host-bound small-batch step took 33.5 ms instead of 38.6 (ResNet-50 b2; torch 24.0) and 17.6
instead of 18.9 (the UNet stack b1; torch 10.7) (``-s19-conv-host-ab.json``).

``ConvHits.conv2d`` keeps one ``ConvSite`` per module: the signature it was made for (dispatcher
and its ``epoch``, policy, the very weight and bias tensors and their data pointers, shapes, strides
and dtypes, the input's shape, strides, dtype, device and 16-byte residue, which operands autograd
records gradients for, ``cudnn.benchmark``), the forward's memoised entry, and the backward's
entries once its first eager backward resolved them (``torch_ops.GradEntries``). A call matching
the signature:

* with autograd not recording (inference): runs the forward entry (``F.conv2d`` itself when torch
  serves it);
* recording, once the backward's entries are kept: runs ``F.conv2d`` itself, so that torch's own
  autograd records it and its backward costs what ``nn.Conv2d``'s does, unless what our kernels
  save there pays for our Python autograd node: the forward's and the kept backward entries' vendor
  margins (``dispatch.vendor_margin_of``: how much a call of ours costs less than torch's, GPU plus
  host time, by the tuning's vendor record; torch-served directions count 0, a kernel entry without
  a vendor record counts as infinite) must sum to more than ``NODE_HOST_MS``, what the node costs
  the host beyond torch's C++ one (to more than 0 under ``AUTOCUTLASS_VENDOR_HOST=0``, where
  verdicts weigh GPU time alone: a workload that keeps the GPU busy). So a layer torch serves in every direction runs ``F.conv2d``
  (``stats()`` then counts the forward, not the backward's directions), and so does one of our
  kernels that gain a few microseconds (``stats().site_torch`` counts such calls). Where
  torch computes dW, one ``aten.convolution_backward`` gives dX with it: our dgrad beside it would
  add a launch, a Python autograd node and, each step the weight changes, the flipped and
  transposed copy of the filter that the dgrad kernel reads (two copies), so the backward then
  counts 0 whatever serves the dgrad (``GradEntries.ours_margin``). An NCHW input of a
  channels_last weight (a GroupNorm's output: Stable Diffusion's resnet blocks) is made
  channels_last first, the copy cuDNN makes itself (``ops.conv.frontend.channels_last_input``), so
  our kernels may serve all three directions. A dgrad wanted alone (a frozen weight) on our kernel without a vendor margin stays there,
  its filter copy kept. On an H100 a ResNet-50 b128 training step on our kernels kept the GPU as
  busy as torch's (32.4 against 32.6 ms of kernels per step) but left it idle 6.7-9.4 ms per step
  in about 57 gaps over 50 us, against 2.0 ms for torch: the GPU waited on our host
  (``benchmarks/results/2026-11-27-h100-s22-jitter.*``), and no ResNet-50 b128 layer's kernel
  saved more than 17.6 us per call (``-s22-verdicts-rn50.json``);
* recording otherwise: a lean autograd Function (``_SiteConv2d``) runs the forward entry, and its
  backward runs the kept dgrad/wgrad entries for a dZ of the kept metadata
  (``torch_ops.conv2d_grads``).

Anything else takes ``autocutlass.conv2d`` (a first call, a changed signature, torch.compile,
autocast, a dispatch mode or tensor subclass, float32 inputs, padding given as a string, a
dispatcher whose memoised entries were dropped since): the site is then made again from that
call. Nothing is remembered across ``copy.deepcopy`` or pickling.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from autocutlass import api
from autocutlass.dispatch import POLICY_OVERRIDE, torch_served
from autocutlass.ops.conv.frontend import CONV2D, channels_last_input
from autocutlass.torch_ops import GradEntries, conv2d_grads, conv2d_output_format, eager_autograd, ours_margin

_F32 = torch.float32
_CL = torch.channels_last

NODE_HOST_MS = 0.14
"""What a recording call of a conv site costs the host beyond ``F.conv2d``'s, in ms: the site's
Python autograd Function with its forward and backward logic against torch's C++ node. Measured on
an H100 machine's host (2026-11-28, ``benchmarks/probes/conv_train_probe.py --nchw-copy on|off``,
``benchmarks/results/2026-11-28-h100-s31-c-*``): in the UNet-style stack at batch 8, whose step is
host-bound, moving 13 layers from ``F.conv2d`` to our sites added 1.85 ms of host time per step
(11.40 against 9.55 ms; the GPU's work fell from 9.50 to 8.89 ms, the step rose from 10.20 to
11.44): 0.14 ms per layer and step. (The test rig's CPU, ``conv_host_cpu_probe.py`` case
``mixed``, 2026-11-27, put the Function alone at about 50 us; 0.03 ms was the rule's value until
session 31.) A recording call of a site runs our kernels only where their vendor margins
(``dispatch.vendor_margin_of``) sum to more than this; otherwise ``F.conv2d``, torch's own
autograd node (the module docstring)."""

_CUDNN = torch.backends.cudnn


def _input_sig(x: torch.Tensor, needs: tuple[bool, bool, bool]) -> tuple[Any, ...]:
    """What of a call besides its weight and bias decides its entries: the input's shape, strides,
    dtype, device and 16-byte residue, which operands want gradients, ``cudnn.benchmark``."""
    return (x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15, needs, _CUDNN.benchmark)


def _param_sig(w: torch.Tensor, b: torch.Tensor | None) -> tuple[Any, ...]:
    """The weight's and bias's data pointers, shapes, strides and dtypes (a ``param.data = ...``
    moves the pointer; the tensors themselves are compared by identity)."""
    return (w.data_ptr(), w.shape, w.stride(), w.dtype, None if b is None else (b.data_ptr(), b.shape, b.stride(), b.dtype))


class ConvSite:
    """One forward signature of a conv module and what serves it (see the module docstring)."""

    __slots__ = ("check", "fwd", "fwd_count", "fwd_part", "node_ms", "args", "fmt", "bias_shape", "grads")

    def __init__(self, check: tuple[Any, ...], fwd: Any, args: tuple[Any, ...], fmt: torch.memory_format,
                 bias_shape: Any, vendor_host: bool = True) -> None:  # fmt: skip
        self.check = check
        self.node_ms = NODE_HOST_MS if vendor_host else 0.0
        """What our kernels must save per training call to run (``NODE_HOST_MS``; 0 where the
        dispatcher's verdicts weigh GPU time alone, ``AUTOCUTLASS_VENDOR_HOST=0``: a workload
        that keeps the GPU busy whatever the host does)."""
        self.fwd = fwd
        self.fwd_count = torch_served(fwd)
        """Counts one call of a torch-served forward entry (None: our kernel serves it)."""
        self.fwd_part = ours_margin(fwd)
        """What our forward entry saves against torch's per call, in ms: its vendor margin (infinite
        without one: nothing says torch's is as fast); 0 where torch serves the forward."""
        self.args = args
        """(stride, padding, dilation, groups) as the forward entry takes them."""
        self.fmt = fmt
        self.bias_shape = bias_shape
        self.grads = GradEntries()
        """The backward's entries once its first eager backward kept them: where torch serves them
        and the forward (``fwd_count``), recording calls run F.conv2d."""

    def forward(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        stride, padding, dilation, groups = self.args
        y = self.fwd(x, w, b, stride, padding, dilation, groups, None, None)
        return y if y.is_contiguous(memory_format=self.fmt) else y.contiguous(memory_format=self.fmt)


class _SiteConv2d(torch.autograd.Function):
    """A conv site's recording call: the forward entry, and a backward through the site's kept
    dgrad/wgrad entries (``conv2d_grads`` with the site's ``GradEntries``; through the ops when the
    backward itself records, for double backward)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, site: ConvSite) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, w)
        ctx.site = site
        return site.forward(x, w, b)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        x, w = ctx.saved_tensors
        site: ConvSite = ctx.site
        stride, padding, dilation, groups = site.args
        direct = not torch.is_grad_enabled()
        need = ctx.needs_input_grad
        dx, dw, db = conv2d_grads(dy, x, w, site.bias_shape, (stride, padding, None, dilation, groups),
                                  (need[0], need[1], need[2]), direct, site.grads if direct else None)  # fmt: skip
        return dx, dw, db, None


class ConvHits:
    """The last forward signature of one conv module and what serves it (see the module docstring)."""

    __slots__ = ("_site",)

    def __init__(self) -> None:
        self._site: ConvSite | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> ConvHits:
        return ConvHits()

    def __reduce__(self) -> tuple[type[ConvHits], tuple[()]]:
        return ConvHits, ()

    def conv2d(self, x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, groups: Any) -> torch.Tensor:
        """``autocutlass.conv2d(x, w, b, stride, padding, dilation, groups)``."""
        if padding.__class__ is str or not eager_autograd(x, w, b) or x.dim() != 4:
            return api.conv2d(x, w, b, stride, padding, dilation, groups)
        if not x.is_contiguous(memory_format=_CL):  # an NCHW x of a channels_last weight: the copy F.conv2d makes
            x = channels_last_input(x, w, groups)
        grad = torch.is_grad_enabled()
        needs = (grad and x.requires_grad, grad and w.requires_grad, grad and b is not None and b.requires_grad)
        site = self._site
        if site is not None:
            c = site.check
            d = c[0]
            if (d.epoch == c[1] and d is api._default and (POLICY_OVERRIDE.policy or d._policy) is c[2]
                    and c[3] is w and c[4] is b
                    and c[5] == _input_sig(x, needs) and c[6] == _param_sig(w, b)):  # fmt: skip
                d._n.memo_hits += 1
                recording = needs[0] or needs[1] or needs[2]
                count = site.fwd_count
                if recording and site.fwd_part + site.grads.ours_margin <= site.node_ms:
                    if count is not None:
                        count()
                    else:
                        d._n.site_torch += 1
                    return F.conv2d(x, w, b, stride, padding, dilation, groups)
                if count is not None and not recording:
                    count()
                    return F.conv2d(x, w, b, stride, padding, dilation, groups)
                if not recording:
                    return site.forward(x, w, b)
                return _SiteConv2d.apply(x, w, b, site)
        if x.dtype is _F32:  # the memo key reads torch's TF32 setting too
            return api.conv2d(x, w, b, stride, padding, dilation, groups)
        d = api.dispatcher()
        epoch, pol = d.epoch, POLICY_OVERRIDE.policy or d._policy
        y = api.conv2d(x, w, b, stride, padding, dilation, groups)  # validates, looks up, tunes on a miss
        args = (tuple(stride), tuple(padding), tuple(dilation), groups)
        with torch.no_grad():  # the key the forward's own look-up made (autograd Functions run without grad)
            entry = d.memoised(CONV2D, x, w, b, *args, None, None)
        if entry is not None and d.epoch == epoch:
            check = (d, epoch, pol, w, b, _input_sig(x, needs), _param_sig(w, b))
            self._site = ConvSite(check, entry, args, conv2d_output_format(x, w), None if b is None else b.shape,
                                  d.settings.vendor_host)  # fmt: skip
        return y
