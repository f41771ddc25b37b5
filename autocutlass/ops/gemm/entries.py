"""The GEMM op's four front-ends (``MATMUL``, ``LINEAR``, ``GEMM``, ``SCALED_MM``): memo keys from
tensor metadata, and the launch closures dispatch memoises.

**Memo keys** (the hit path): the front-end itself, the policy, then per tensor: shape, strides,
dtype, device index, ``data_ptr() % 16``; plus the autograd and TF32 flags and the epilogue
choices; for ``scaled_mm`` the shape, dtype and device of the scales and of ``scale_result``,
never their values, ``out_dtype`` and ``use_fast_accum``. Nothing is validated on a hit: the key
is built from metadata alone.

**Launch closures**: the ``as_strided`` views the plan needs, ``torch.empty`` for the output and
the runner's launch on the current stream. Nothing synchronises, nothing allocates outside
torch's caching allocator, so a tuned call can be captured in a CUDA graph. An ``out=`` that
overlaps an input is computed by torch into fresh memory and copied.

fp8 (``scaled_mm``) passes the user's scale tensors, as (1,) views, to the runner as
``scale_a``/``scale_b``; the kernel reads them on the device, so nothing synchronises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autocutlass.ops.base import Entry, PlanContext, Unsupported
from autocutlass.ops.gemm import frontend as fe
from autocutlass.ops.gemm.frontend import Call, Context, KernelPlan, Op
from autocutlass.ops.launch import NO_VIEW, meta, on_device, overlaps, remember_view
from autocutlass.ops.types import Activation

_F32 = torch.float32
_GRAD = torch.is_grad_enabled
_LINEAR = torch.nn.functional.linear


def _tf32_allowed() -> bool:
    return torch.backends.cuda.matmul.fp32_precision == "tf32"


def _context(call: Call, ctx: PlanContext) -> Context:
    tensors = [t for t in (call.a, call.b, call.c, call.bias, call.scale_a, call.scale_b) if t is not None]
    grad = _GRAD() and any(t.requires_grad for t in tensors)
    tf32 = call.op is not Op.SCALED_MM and call.a.dtype is _F32 and _tf32_allowed()
    return Context(on_gpu=ctx.on_gpu, device_info=ctx.device_info, grad=grad, tf32=tf32)


def _gemm_launch(plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
    """(a, b, c, bias, out, alpha, beta) -> result: views, output allocation, one runner call;
    ``_direct_launch``'s shorter path when the runner offers one."""
    general = _runner_launch(plan, runner, call)
    return _direct_launch(plan, runner, call, general) or general


def _kernel_view(view: fe.View | None, t: torch.Tensor | None, swap: bool) -> tuple[Any, Any] | None:
    """(shape, stride) of the kernel's view of the user tensor ``t`` (``view``'s, or ``t``'s own
    when None), its last two modes exchanged when the kernel runs the swapped problem; None when
    the kernel reads ``t`` as it is."""
    if view is None:
        if not swap or t is None:
            return None
        shape, stride = tuple(t.shape), tuple(t.stride())
    else:
        shape, stride = view.shape, view.stride
    if swap:
        shape = (*shape[:-2], shape[-1], shape[-2])
        stride = (*stride[:-2], stride[-1], stride[-2])
    return shape, stride


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of ``shape`` (torch's, as ``torch.empty`` makes them)."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)


def _direct_launch(plan: KernelPlan, runner: Any, call: Call, general: Entry) -> Entry | None:
    """The launch with nothing between the views and the compiled function, for runners that
    offer it (``HopperGemmRunner.direct_launch``: not workspace split-K, tf32 copies or fp8
    scales): per call one ``torch.empty_strided``, one ``as_strided`` per operand whose kernel
    view is not the tensor itself (the weight's cached), serial split-K's or stream-K's scratch,
    the launch. Every call of a memo entry has the shapes and strides of the call it was built
    from (they are in the memo key), so the kernel's
    views, transposed for a ``swap_ab`` config, are fixed here once, as are the compiled function
    and the grid's bound, instead of re-derived by the runner per call (its transposes, rank and
    device look-ups: about a third of the hit path's host time in an eager decode step, H100).
    ``out=`` calls take ``general`` (the overlap guard)."""
    offer = getattr(runner, "direct_launch", None)
    av, bv, cv, dv = plan.a, plan.b, plan.c, plan.d
    if offer is None or (av is not None and av.copy) or (bv is not None and bv.copy):
        return None
    rank = len(av.shape) if av is not None else call.a.dim()
    swap = bool(runner.swaps_operands)
    shape, dtype, device = plan.out_shape, plan.out_dtype, call.a.device
    with_c = plan.problem.epilogue.with_c
    ka = _kernel_view(av, call.a, swap)
    kb = _kernel_view(bv, call.b, swap)
    # the tensor the epilogue reads as C: linear's mul when given, else its residual / gemm's C
    kc = _kernel_view(cv, call.mul if call.mul is not None else call.c, swap) if with_c else None
    # out is allocated contiguous (torch.empty_strided parses its arguments faster than torch.empty);
    # the kernel writes it as it is, or through the plan's view, transposed when swapped
    strides = _contiguous(tuple(shape))
    kd = _kernel_view(dv or fe.View(tuple(shape), strides), None, swap) if dv is not None or swap else None
    d_shape = kd[0] if kd is not None else tuple(shape)
    spec = offer(rank, max(plan.device_index, 0), d_shape[-2], d_shape[-1], d_shape[0] if len(d_shape) == 3 else 1)
    if spec is None:
        return None
    fn, clusters, scratch = spec
    b_seen = [NO_VIEW]  # (weight, weakly; its kernel view; its data_ptr): ops.launch.remember_view

    def run(a: Any, b: Any, c: Any, bias: Any, out: Any, alpha: float, beta: float) -> torch.Tensor:
        if out is not None:
            return general(a, b, c, bias, out, alpha, beta)
        out = torch.empty_strided(shape, strides, dtype=dtype, device=device)
        if ka is not None:
            a = a.as_strided(*ka)
        if kb is not None:
            seen = b_seen[0]
            ptr = b.data_ptr()
            if seen[0]() is b and ptr == seen[2]:
                b = seen[1]
            else:
                b = remember_view(b_seen, b, b.detach().as_strided(*kb), ptr)
        d = out if kd is None else out.as_strided(*kd)
        if not with_c:
            c = None
        elif kc is not None:
            c = c.as_strided(*kc)
        work, count = (None, None) if scratch is None else scratch()
        if swap:
            fn(b, a, d, c, bias, work, count, None, None, alpha, beta, clusters)
        else:
            fn(a, b, d, c, bias, work, count, None, None, alpha, beta, clusters)
        return out

    return run


def _runner_launch(plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
    """The launch through the runner's ``__call__`` (every runner; ``out=`` calls)."""
    av, bv, cv, dv = plan.a, plan.b, plan.c, plan.d
    shape, dtype, device = plan.out_shape, plan.out_dtype, call.a.device
    with_c = plan.problem.epilogue.with_c
    span_a, span_b, span_c, span_d = plan.spans
    op, act = call.op, call.activation

    # The B view of the last weight seen: inference calls pass the same parameter every time,
    # and re-deriving its transposed view costs about a microsecond per call. The data pointer is
    # compared too, so that `param.data = other` (new storage, same object) is never served stale.
    b_seen = [NO_VIEW]  # (weight, weakly; its view; its data_ptr): ops.launch.remember_view

    def run(a: Any, b: Any, c: Any, bias: Any, out: Any, alpha: float, beta: float) -> torch.Tensor:
        if out is None:
            out = torch.empty(shape, dtype=dtype, device=device)
        else:
            o = out.data_ptr()
            if (
                overlaps(o, span_d, a.data_ptr(), span_a)
                or overlaps(o, span_d, b.data_ptr(), span_b)
                or (with_c and overlaps(o, span_d, c.data_ptr(), span_c)
                    and not (c.data_ptr() == o and c.stride() == out.stride()))
            ):  # fmt: skip
                # out= aliases an input: let torch compute into fresh memory, then copy.
                r = fe.torch_call(Call(op, a, b, c, bias, None, alpha, beta, act))
                return out.copy_(r)
        if av is not None:
            a = a.reshape(av.shape) if av.copy else a.as_strided(av.shape, av.stride)
        if bv is not None:
            seen = b_seen[0]
            ptr = b.data_ptr()
            if seen[0]() is b and ptr == seen[2]:
                b = seen[1]
            else:
                b = remember_view(b_seen, b, b.detach().as_strided(bv.shape, bv.stride), ptr)
        if not with_c:
            c = None
        elif cv is not None:
            c = c.as_strided(cv.shape, cv.stride)
        runner(a, b, out if dv is None else out.as_strided(dv.shape, dv.stride), c=c, bias=bias, alpha=alpha, beta=beta)
        return out

    return run


class MatmulFrontEnd:
    """``autocutlass.matmul(a, b, out=None)``."""

    name = "matmul"

    def memo_key(self, policy: Any, a: Any, b: Any, out: Any) -> tuple[Any, ...]:
        return (
            self, policy,
            _GRAD() and (a.requires_grad or b.requires_grad),
            a.dtype is _F32 and _tf32_allowed(),
            a.shape, a.stride(), a.dtype, a.get_device(), a.data_ptr() & 15,
            b.shape, b.stride(), b.dtype, b.get_device(), b.data_ptr() & 15,
            None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() & 15),
        )  # fmt: skip

    def make_call(self, a: Any, b: Any, out: Any) -> Call:
        return Call(Op.MATMUL, a, b, out=out)

    def reject(self, a: Any, b: Any, out: Any) -> None:
        fe.expected_result(self.make_call(a, b, out))

    def expected(self, call: Call) -> None:
        fe.expected_result(call)

    def plan(self, call: Call, ctx: PlanContext) -> KernelPlan | Unsupported:
        return fe.plan(call, _context(call, ctx))

    def torch_entry(self, call: Call) -> Entry:
        return lambda a, b, out: fe.torch_call(Call(Op.MATMUL, a, b, out=out))

    def kernel_entry(self, plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
        run = _gemm_launch(plan, runner, call)
        return on_device(lambda a, b, out: run(a, b, None, None, out, 1.0, 0.0), plan.device_index)


class LinearFrontEnd:
    """``autocutlass.linear(x, weight, bias=None, activation=None, residual=None, mul=None)``: the
    residual is the epilogue's C (beta 1), added before the activation; or the mul is, multiplying
    after it (``Epilogue.c_mul``). ``activation="swiglu"``: ``silu(gate) * up`` of a packed
    (2N, K) weight (``Epilogue.swiglu``), neither residual nor mul."""

    name = "linear"

    def memo_key(self, policy: Any, x: Any, weight: Any, bias: Any, activation: Any,
                 residual: Any = None, mul: Any = None) -> tuple[Any, ...]:  # fmt: skip
        r = residual
        return (
            self, policy,
            _GRAD() and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
                         or (r is not None and r.requires_grad) or (mul is not None and mul.requires_grad)),
            x.dtype is _F32 and _tf32_allowed(),
            x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15,
            weight.shape, weight.stride(), weight.dtype, weight.get_device(), weight.data_ptr() & 15,
            None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device(), bias.data_ptr() & 15),
            activation,
            None if r is None else (r.shape, r.stride(), r.dtype, r.get_device(), r.data_ptr() & 15),
            None if mul is None else (mul.shape, mul.stride(), mul.dtype, mul.get_device(), mul.data_ptr() & 15),
        )  # fmt: skip

    def make_call(self, x: Any, weight: Any, bias: Any, activation: Any, residual: Any = None, mul: Any = None) -> Call:
        act, swiglu = fe.parse_linear_activation(activation)
        return Call(Op.LINEAR, x, weight, c=residual, bias=bias, beta=1.0, activation=act, mul=mul,
                    swiglu=swiglu)  # fmt: skip

    def reject(self, x: Any, weight: Any, bias: Any, activation: Any, residual: Any = None, mul: Any = None) -> None:
        swiglu = isinstance(activation, str) and activation == fe.SWIGLU
        fe.expected_result(Call(Op.LINEAR, x, weight, c=residual, bias=bias, mul=mul, swiglu=swiglu))

    def expected(self, call: Call) -> None:
        fe.expected_result(call)

    def plan(self, call: Call, ctx: PlanContext) -> KernelPlan | Unsupported:
        return fe.plan(call, _context(call, ctx))

    def torch_entry(self, call: Call) -> Entry:
        act, swiglu = call.activation, call.swiglu
        if act is Activation.NONE and not swiglu and call.c is None and call.mul is None:
            # a plain linear (every call of this memo entry is one: the key holds the epilogue):
            # F.linear itself, nothing between (vendor verdicts serve eager decode GEMMs, host-bound)
            def plain(x: Any, w: Any, bias: Any, _activation: Any, residual: Any = None, mul: Any = None) -> torch.Tensor:
                return _LINEAR(x, w, bias)

            return plain

        def run(x: Any, w: Any, bias: Any, _activation: Any, residual: Any = None, mul: Any = None) -> torch.Tensor:
            return fe.torch_call(Call(Op.LINEAR, x, w, c=residual, bias=bias, beta=1.0, activation=act, mul=mul,
                                      swiglu=swiglu))  # fmt: skip

        return run

    def kernel_entry(self, plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
        run = _gemm_launch(plan, runner, call)

        def launch(x: Any, w: Any, bias: Any, _activation: Any, residual: Any = None, mul: Any = None) -> torch.Tensor:
            return run(x, w, residual if mul is None else mul, bias, None, 1.0, 1.0)

        return on_device(launch, plan.device_index)


class GemmFrontEnd:
    """``autocutlass.gemm(a, b, c=None, alpha=1.0, beta=0.0, out=None)``."""

    name = "gemm"

    def memo_key(self, policy: Any, a: Any, b: Any, c: Any, alpha: Any, beta: Any, out: Any) -> tuple[Any, ...]:
        return (
            self, policy,
            _GRAD() and (a.requires_grad or b.requires_grad or (c is not None and c.requires_grad)),
            a.dtype is _F32 and _tf32_allowed(),
            a.shape, a.stride(), a.dtype, a.get_device(), a.data_ptr() & 15,
            b.shape, b.stride(), b.dtype, b.get_device(), b.data_ptr() & 15,
            None if c is None else (c.shape, c.stride(), c.dtype, c.get_device(), c.data_ptr() & 15),
            beta != 0,
            None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() & 15),
        )  # fmt: skip

    def make_call(self, a: Any, b: Any, c: Any, alpha: Any, beta: Any, out: Any) -> Call:
        return Call(Op.GEMM, a, b, c=c, out=out, alpha=float(alpha), beta=float(beta))

    def reject(self, a: Any, b: Any, c: Any, alpha: Any, beta: Any, out: Any) -> None:
        fe.expected_result(Call(Op.GEMM, a, b, c=c, out=out))

    def expected(self, call: Call) -> None:
        fe.expected_result(call)

    def plan(self, call: Call, ctx: PlanContext) -> KernelPlan | Unsupported:
        return fe.plan(call, _context(call, ctx))

    def torch_entry(self, call: Call) -> Entry:
        return lambda a, b, c, alpha, beta, out: fe.torch_call(Call(Op.GEMM, a, b, c, None, out, float(alpha), float(beta)))

    def kernel_entry(self, plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
        run = _gemm_launch(plan, runner, call)
        return on_device(
            lambda a, b, c, alpha, beta, out: run(a, b, c, None, out, float(alpha), float(beta)), plan.device_index
        )


class ScaledMmFrontEnd:
    """``autocutlass.scaled_mm`` (``torch._scaled_mm``'s signature plus ``out`` and ``activation``);
    entries take ``(a, b, scale_a, scale_b, bias, out_dtype, out, activation, use_fast_accum,
    scale_result)``."""

    name = "scaled_mm"

    def memo_key(self, policy: Any, a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, out_dtype: Any,
                 out: Any, activation: Any, use_fast_accum: Any, scale_result: Any) -> tuple[Any, ...]:  # fmt: skip
        key = (
            self, policy,
            _GRAD() and (a.requires_grad or b.requires_grad or scale_a.requires_grad or scale_b.requires_grad
                         or (bias is not None and bias.requires_grad)),
            a.shape, a.stride(), a.dtype, a.get_device(), a.data_ptr() & 15,
            b.shape, b.stride(), b.dtype, b.get_device(), b.data_ptr() & 15,
            scale_a.shape, scale_a.dtype, scale_a.get_device(),
            scale_b.shape, scale_b.dtype, scale_b.get_device(),
            meta(bias),
            out_dtype,
            meta(out),
            activation,
            # True/False themselves: 1 == True would share True's entry (torch rejects non-bools)
            use_fast_accum if use_fast_accum.__class__ is bool else (type(use_fast_accum), use_fast_accum),
            None if scale_result is None else (scale_result.shape, scale_result.dtype, scale_result.get_device()),
        )  # fmt: skip
        return key  # unhashable: an out_dtype, activation or use_fast_accum torch would reject

    def _call(self, a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, out_dtype: Any, out: Any,
              activation: Any, use_fast_accum: Any, scale_result: Any) -> Call:  # fmt: skip
        return Call(Op.SCALED_MM, a, b, bias=bias, out=out, activation=fe.parse_activation(activation),
                    scale_a=scale_a, scale_b=scale_b, scale_result=scale_result, out_dtype=out_dtype,
                    fast_accum=use_fast_accum)  # fmt: skip

    def make_call(self, *args: Any) -> Call:
        return self._call(*args)

    def reject(self, a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, out_dtype: Any, out: Any,
               activation: Any, use_fast_accum: Any, scale_result: Any) -> None:  # fmt: skip
        fe.expected_result(
            Call(Op.SCALED_MM, a, b, bias=bias, out=out, scale_a=scale_a, scale_b=scale_b,
                 scale_result=scale_result, out_dtype=out_dtype, fast_accum=use_fast_accum)
        )  # raises the error naming the argument  # fmt: skip
        fe.parse_activation(activation)

    def expected(self, call: Call) -> None:
        fe.expected_result(call)

    def plan(self, call: Call, ctx: PlanContext) -> KernelPlan | Unsupported:
        return fe.plan(call, _context(call, ctx))

    def torch_entry(self, call: Call) -> Entry:
        act, out_dtype, fast = call.activation, call.out_dtype, call.fast_accum

        def run(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, _out_dtype: Any, out: Any, _act: Any,
                _fast: Any, scale_result: Any) -> torch.Tensor:  # fmt: skip
            return fe.torch_call(
                Call(Op.SCALED_MM, a, b, None, bias, out, activation=act, scale_a=scale_a, scale_b=scale_b,
                     scale_result=scale_result, out_dtype=out_dtype, fast_accum=fast)
            )  # fmt: skip

        return run

    def kernel_entry(self, plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
        """The runner also gets the two scale tensors, (1,) views of the user's one-element
        tensors (their values stay on the device). No C, alpha or beta; a call with a
        ``scale_result`` is never served, so the entry ignores it."""
        av, bv, dv = plan.a, plan.b, plan.d
        shape, dtype, device = plan.out_shape, plan.out_dtype, call.a.device
        span_a, span_b, _, span_d = plan.spans
        assert call.scale_a is not None and call.scale_b is not None
        span_bias, span_sa, span_sb = (fe.byte_span(t) for t in (call.bias, call.scale_a, call.scale_b))
        view_sa, view_sb = call.scale_a.dim() != 1, call.scale_b.dim() != 1  # () or (1, 1): viewed as (1,)
        act = call.activation

        def run(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, _out_dtype: Any, out: Any, _act: Any,
                _fast: Any, _scale_result: Any) -> torch.Tensor:  # fmt: skip
            if out is None:
                out = torch.empty(shape, dtype=dtype, device=device)
            else:
                o = out.data_ptr()
                if (
                    overlaps(o, span_d, a.data_ptr(), span_a)
                    or overlaps(o, span_d, b.data_ptr(), span_b)
                    or (bias is not None and overlaps(o, span_d, bias.data_ptr(), span_bias))
                    or overlaps(o, span_d, scale_a.data_ptr(), span_sa)
                    or overlaps(o, span_d, scale_b.data_ptr(), span_sb)
                ):  # out= aliases an input: torch computes into fresh memory, then copies.
                    r = fe.torch_call(
                        Call(Op.SCALED_MM, a, b, None, bias, None, activation=act, scale_a=scale_a, scale_b=scale_b,
                             out_dtype=dtype, fast_accum=True)
                    )  # fmt: skip
                    return out.copy_(r)
            if av is not None:
                a = a.as_strided(av.shape, av.stride)
            if bv is not None:
                b = b.as_strided(bv.shape, bv.stride)
            if view_sa:
                scale_a = scale_a.reshape(1)
            if view_sb:
                scale_b = scale_b.reshape(1)
            d = out if dv is None else out.as_strided(dv.shape, dv.stride)
            runner(a, b, d, bias=bias, scale_a=scale_a, scale_b=scale_b)
            return out

        return on_device(run, plan.device_index)


MATMUL = MatmulFrontEnd()
LINEAR = LinearFrontEnd()
GEMM = GemmFrontEnd()
SCALED_MM = ScaledMmFrontEnd()
