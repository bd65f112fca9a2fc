"""smax.torch: the smax family as differentiable PyTorch functions.

Each function is a torch.autograd.Function whose forward is the smax kernel
and whose backward is the matching smax vector-Jacobian product (in double
they pass torch.autograd.gradcheck; tests/test_torch.py). Same names and
parameters as the module smax, with ``dim`` for ``axis``:

    import smax.torch as st
    p = st.entmax15(scores, dim=-1)           # scores.requires_grad -> p has a grad_fn
    p = st.softmax(scores, dim=-1, threads=2)

CPU tensors, float32, float64, float16 or bfloat16 (16-bit: computed in
float, each output rounded once; gradcheck needs double). Gradients flow to the input only (not to
alpha, eps, s, b or tau). gumbel_softmax with hard=True is straight-through:
the forward gives the one-hot, the backward the soft sample's gradient (as
torch.nn.functional.gumbel_softmax). Backward of backward is not supported.
"""
import math

import torch
from torch.autograd.function import once_differentiable

import smax as _s

__all__ = [
    "softmax", "log_softmax", "sparsemax", "entmax15", "entmax_bisect", "stablemax",
    "log_stablemax", "softpick", "ssmax", "gumbel_softmax", "gumbel_noise",
]


def _check(x, name="x"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _grad(dy):
    # autograd may hand a non-contiguous or expanded gradient; smax copies
    # those itself, but an expanded one (stride 0) must not be written.
    return dy.detach()


class _FromOutput(torch.autograd.Function):
    """Forward f(x, **kw) -> y; backward from y: dx = vjp(y, dy, **kw)."""

    @staticmethod
    def forward(ctx, x, forward, vjp, dim, threads, kw, vjp_kw):
        y = forward(x.detach(), dim, threads=threads, **kw)
        ctx.save_for_backward(y)
        ctx.vjp, ctx.dim, ctx.threads, ctx.vjp_kw = vjp, dim, threads, vjp_kw
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        dx = ctx.vjp(y, _grad(dy), ctx.dim, threads=ctx.threads, **ctx.vjp_kw)
        return dx, None, None, None, None, None, None


class _FromInput(torch.autograd.Function):
    """Backward from x (and y when vjp takes it): stablemax, softpick, log_stablemax."""

    @staticmethod
    def forward(ctx, x, forward, vjp, dim, threads, kw, needs_y):
        x = x.detach()
        y = forward(x, dim, threads=threads, **kw)
        ctx.save_for_backward(x, y)
        ctx.vjp, ctx.dim, ctx.threads, ctx.kw, ctx.needs_y = vjp, dim, threads, kw, needs_y
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, y = ctx.saved_tensors
        if ctx.needs_y:
            dx = ctx.vjp(x, y, _grad(dy), ctx.dim, threads=ctx.threads, **ctx.kw)
        else:
            dx = ctx.vjp(x, _grad(dy), ctx.dim, threads=ctx.threads, **ctx.kw)
        return dx, None, None, None, None, None, None


def softmax(x, dim=-1, *, algorithm="automatic", threads=None):
    return _FromOutput.apply(_check(x), _s.softmax, _s.softmax_backward, dim, threads,
                             {"algorithm": algorithm}, {})


def log_softmax(x, dim=-1, *, threads=None):
    return _FromOutput.apply(_check(x), _s.log_softmax, _s.log_softmax_backward, dim, threads, {}, {})


def sparsemax(x, dim=-1, *, threads=None):
    return _FromOutput.apply(_check(x), _s.sparsemax, _s.sparsemax_backward, dim, threads, {}, {})


def entmax15(x, dim=-1, *, threads=None):
    return _FromOutput.apply(_check(x), _s.entmax15, _s.entmax_backward, dim, threads, {}, {"alpha": 1.5})


def entmax_bisect(x, dim=-1, *, alpha=1.5, n_iter=50, threads=None):
    return _FromOutput.apply(_check(x), _s.entmax_bisect, _s.entmax_backward, dim, threads,
                             {"alpha": alpha, "n_iter": n_iter}, {"alpha": alpha})


def stablemax(x, dim=-1, *, threads=None):
    return _FromInput.apply(_check(x), _s.stablemax, _s.stablemax_backward, dim, threads, {}, False)


def softpick(x, dim=-1, *, eps=1e-8, threads=None):
    return _FromInput.apply(_check(x), _s.softpick, _s.softpick_backward, dim, threads, {"eps": eps}, True)


def _log_stablemax_vjp(x, y, dy, dim, threads=None):
    # log s(x_i) - log S: d/dx_j = s'(x_j) / s(x_j) (dy_j - p_j sum dy), with
    # s'/s = 1 / (1 + |x|) on both branches and p = exp(y) = stablemax(x).
    del threads
    return (dy - torch.exp(y) * dy.sum(dim, keepdim=True)) / (1 + x.abs())


def log_stablemax(x, dim=-1, *, threads=None):
    return _FromInput.apply(_check(x), _s.log_stablemax, _log_stablemax_vjp, dim, threads, {}, True)


def ssmax(x, dim=-1, *, s, b=0.0, threads=None):
    # softmax(c x) with c = s log(n) + b: dx = c * softmax_backward(y, dy).
    c = s * math.log(x.shape[dim]) + b if x.dim() else 0.0
    return _FromOutput.apply(_check(x), _s.ssmax, _scaled_softmax_vjp, dim, threads, {"s": s, "b": b}, {"c": c})


def _scaled_softmax_vjp(y, dy, dim, threads=None, c=1.0):
    dx = _s.softmax_backward(y, dy, dim, threads=threads)
    return dx.mul_(c)


class _GumbelSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, dim, tau, seed, hard, threads):
        logits = logits.detach()
        soft = _s.gumbel_softmax(logits, dim, tau=tau, seed=seed, threads=threads)
        ctx.save_for_backward(soft)
        ctx.dim, ctx.tau, ctx.threads = dim, tau, threads
        if hard:  # the same noise, the one-hot of the argmax (straight-through backward)
            return _s.gumbel_softmax(logits, dim, tau=tau, seed=seed, hard=True, threads=threads)
        return soft

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (soft,) = ctx.saved_tensors
        dx = _s.softmax_backward(soft, _grad(dy), ctx.dim, threads=ctx.threads)
        return dx.div_(ctx.tau), None, None, None, None, None


def gumbel_softmax(logits, dim=-1, *, tau, seed, hard=False, threads=None):
    return _GumbelSoftmax.apply(_check(logits, "logits"), dim, tau, seed, hard, threads)


def gumbel_noise(shape, *, seed, offset=0, dtype=torch.float32):
    """Gumbel(0, 1) noise as a tensor (smax.gumbel_noise; not differentiable)."""
    if dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        raise TypeError(f"dtype must be torch.float32, float64, float16 or bfloat16, got {dtype}")
    out = torch.empty(shape, dtype=dtype)
    _s.gumbel_noise(seed=seed, offset=offset, out=out)
    return out
