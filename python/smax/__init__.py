"""smax: softmax-family kernels for CPUs (AVX-512, AVX2+FMA, SSE2, NEON), from Python.

Every function takes a float32, float64 or float16 array -- a numpy array,
anything with the buffer protocol, or anything with ``__dlpack__`` (a CPU
PyTorch tensor, bfloat16 too) -- and works along ``axis`` (default: the last) without copying
when the rows along that axis are contiguous and evenly spaced; otherwise
(a strided or transposed view) it copies into a scratch buffer and writes
the result back, so every layout gives the right answer.

Common keywords:
  axis     the axis the function normalises over (the second positional
           argument after the arrays; every other parameter is a keyword)
  out      array to write (same shape and dtype as the input; may be the
           input itself: in place); returned
  threads  None or 1: the calling thread; k > 1: the calling thread plus
           k - 1 pooled workers; 0: one per hardware thread. The result is
           bitwise the same for any value.

The result has the input's kind: a torch tensor for a torch tensor input,
a numpy array otherwise. The GIL is released while the kernel runs. Bad
arguments raise ValueError (bad values: axis, shape, alpha, eps, tau, ...)
or TypeError (wrong dtype, not an array), naming the argument.

See docs/python.md. The functions are those of the C++ header smax/smax.hpp,
with the same names, formulas, special values and parameters.
"""
import numpy as _np

from . import _smax

__all__ = [
    "softmax", "log_softmax", "sparsemax", "entmax15", "entmax_bisect", "stablemax",
    "log_stablemax", "softpick", "ssmax", "gumbel_noise", "gumbel_softmax",
    "softmax_backward", "log_softmax_backward", "sparsemax_backward", "entmax_backward",
    "stablemax_backward", "softpick_backward",
    "active_isa", "available_isas", "set_isa", "gumbel_row_seed", "ALGORITHMS",
]
__version__ = _smax.version()

#: softmax's algorithm names (smax::algorithm), in the C API's order.
ALGORITHMS = ("automatic", "three_pass_recompute", "three_pass_reload", "two_pass", "online")


def active_isa():
    """The ISA the kernels run on now: "avx512", "avx2", "sse2" or "neon"."""
    return _smax.active_isa()


def available_isas():
    """The ISAs compiled in that this CPU runs, best first."""
    return _smax.available_isas()


def set_isa(isa):
    """Run every later call on ``isa`` (None: back to the best); ValueError if unavailable."""
    _smax.set_isa(isa)


def gumbel_row_seed(seed, row):
    """The seed that row ``row`` of an N-D gumbel_softmax draws with."""
    return _smax.gumbel_row_seed(seed, row)


# ------------------------------------------------------------ array plumbing

def _is_torch(obj):
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "numpy")


class _BF16(_np.ndarray):
    """A torch bfloat16 tensor's memory as numpy uint16 (numpy has no bfloat16)."""


_DTYPES = (_np.float32, _np.float64, _np.float16)


def _as_array(obj, name, writable=False):
    """A numpy view of obj (no copy for arrays, buffers, tensors)."""
    if isinstance(obj, _np.ndarray):
        a = obj
    elif _is_torch(obj):
        if obj.device.type != "cpu":
            raise ValueError(f"{name} must be a CPU tensor, got one on {obj.device}")
        import torch
        if obj.dtype == torch.bfloat16:
            return obj.detach().view(torch.int16).numpy().view(_np.uint16).view(_BF16)
        try:
            a = obj.detach().numpy()
        except TypeError as e:  # dtypes numpy lacks
            raise TypeError(f"{name} must be float32, float64, float16 or bfloat16, got {obj.dtype}") from e
    elif hasattr(obj, "__dlpack__") and not writable:
        a = _np.from_dlpack(obj)
    else:
        try:
            a = _np.asarray(obj)
        except Exception as e:
            raise TypeError(f"{name} must be an array (numpy, buffer protocol or __dlpack__), "
                            f"got {type(obj).__name__}") from e
    if not (a.dtype in _DTYPES or isinstance(a, _BF16)):
        raise TypeError(f"{name} must be float32, float64, float16 or bfloat16, got {a.dtype}")
    if writable and not a.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return a


def _dtype_name(a):
    return "bfloat16" if isinstance(a, _BF16) else str(a.dtype)


def _axis(axis, ndim, name="axis"):
    if isinstance(axis, bool) or not isinstance(axis, (int, _np.integer)):
        raise TypeError(f"{name} must be an int, got {type(axis).__name__}")
    if ndim == 0:
        raise ValueError("x must have at least one dimension")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}={axis} is out of range for an array of {ndim} dimensions")
    return int(axis) % ndim


def _threads(threads):
    if threads is None:
        return 1
    if isinstance(threads, bool) or not isinstance(threads, (int, _np.integer)):
        raise TypeError(f"threads must be an int or None, got {type(threads).__name__}")
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")
    return int(threads)


def _rows(a):
    """a (axis already last) as a 2-D view with contiguous, evenly spaced rows, or None."""
    n = a.shape[-1]
    if a.ndim == 0:
        return None
    if (n > 1 and a.strides[-1] != a.itemsize) or not a.flags.aligned:
        return None
    v = a.view()
    try:
        v.shape = (-1 if n else int(_np.prod(a.shape[:-1])), n)  # raises if a copy were needed
    except AttributeError:
        return None
    if v.shape[0] > 1 and (v.strides[0] < 0 or v.strides[0] % a.itemsize or v.strides[0] < n * a.itemsize):
        return None
    return v


def _same_view(a, b):
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides == b.strides and a.shape == b.shape)


def _wrap(result, like):
    if _is_torch(like):
        import torch
        if isinstance(result, _BF16):
            return torch.from_numpy(result.view(_np.ndarray).view(_np.int16)).view(torch.bfloat16)
        return torch.from_numpy(result) if isinstance(result, _np.ndarray) else result
    return result


def _apply(kernel, inputs, axis, out, threads, scalars=()):
    """Runs kernel(*rows(inputs), rows(out), *scalars, threads) along axis.

    inputs: [(object, name)], all of the first one's shape and dtype.
    """
    arrays = [_as_array(obj, name) for obj, name in inputs]
    first, first_name = arrays[0], inputs[0][1]
    ax = _axis(axis, first.ndim)
    for a, (_, name) in zip(arrays[1:], inputs[1:]):
        if a.shape != first.shape:
            raise ValueError(f"{name} has shape {a.shape}, {first_name} has {first.shape}")
        if a.dtype != first.dtype or isinstance(a, _BF16) != isinstance(first, _BF16):
            raise TypeError(f"{name} is {_dtype_name(a)}, {first_name} is {_dtype_name(first)}")
    nthreads = _threads(threads)
    like = inputs[0][0]
    if out is None:
        o = _np.empty(first.shape, first.dtype)
        if isinstance(first, _BF16):
            o = o.view(_BF16)
        out_obj = None
    else:
        o = _as_array(out, "out", writable=True)
        if o.shape != first.shape:
            raise ValueError(f"out has shape {o.shape}, {first_name} has {first.shape}")
        if o.dtype != first.dtype or isinstance(o, _BF16) != isinstance(first, _BF16):
            raise TypeError(f"out is {_dtype_name(o)}, {first_name} is {_dtype_name(first)}")
        out_obj = out
    moved = [_np.moveaxis(a, ax, -1) for a in arrays]
    o_moved = _np.moveaxis(o, ax, -1)
    rows_in = []
    for a in moved:
        r = _rows(a)
        # A layout the kernels cannot take, or an input that overlaps out
        # without being exactly out, is read from a fresh (aligned, C-order)
        # copy; ascontiguousarray could return the input itself.
        if r is None or (out is not None and _np.may_share_memory(a, o_moved) and not _same_view(a, o_moved)):
            r = _rows(_np.array(a, order="C", copy=True))
        rows_in.append(r)
    o_rows = _rows(o_moved)
    if first.size:
        if o_rows is None:
            scratch = _np.empty(o_moved.shape, o.dtype)
            kernel(*rows_in, _rows(scratch), *scalars, nthreads)
            o_moved[...] = scratch
        else:
            kernel(*rows_in, o_rows, *scalars, nthreads)
    if out_obj is not None:
        return out_obj
    return _wrap(o, like)


def _algorithm(a):
    if isinstance(a, str):
        try:
            return ALGORITHMS.index(a)
        except ValueError:
            pass
    raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {a!r}")


def _real(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, float, _np.integer, _np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
    return float(v)


def _int(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, _np.integer)):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    return int(v)


def _seed(v, name):
    v = _int(v, name)
    if not 0 <= v < 2 ** 64:
        raise ValueError(f"{name} must be in [0, 2**64), got {v}")
    return v


# ----------------------------------------------------------------- forward

def softmax(x, axis=-1, *, algorithm="automatic", out=None, threads=None):
    """y = exp(x - max) / sum exp(x - max) along axis. algorithm: one of ALGORITHMS."""
    return _apply(_smax.softmax, [(x, "x")], axis, out, threads, (_algorithm(algorithm),))


def log_softmax(x, axis=-1, *, out=None, threads=None):
    """y = x - max - log(sum exp(x - max)) along axis."""
    return _apply(_smax.log_softmax, [(x, "x")], axis, out, threads)


def sparsemax(x, axis=-1, *, out=None, threads=None):
    """Euclidean projection of x onto the probability simplex (Martins & Astudillo 2016)."""
    return _apply(_smax.sparsemax, [(x, "x")], axis, out, threads)


def entmax15(x, axis=-1, *, out=None, threads=None):
    """Exact 1.5-entmax (Peters et al. 2019)."""
    return _apply(_smax.entmax15, [(x, "x")], axis, out, threads)


def entmax_bisect(x, axis=-1, *, alpha=1.5, n_iter=50, out=None, threads=None):
    """alpha-entmax by bisection; alpha >= 1 (1: softmax, 2: sparsemax), n_iter >= 0."""
    return _apply(_smax.entmax_bisect, [(x, "x")], axis, out, threads,
                  (_real(alpha, "alpha"), _int(n_iter, "n_iter")))


def stablemax(x, axis=-1, *, out=None, threads=None):
    """Stablemax (Prieto et al. 2025): s(x) / sum s, s(x) = x + 1 (x >= 0), 1 / (1 - x) (x < 0)."""
    return _apply(_smax.stablemax, [(x, "x")], axis, out, threads)


def log_stablemax(x, axis=-1, *, out=None, threads=None):
    """log(stablemax(x))."""
    return _apply(_smax.log_stablemax, [(x, "x")], axis, out, threads)


def softpick(x, axis=-1, *, eps=1e-8, out=None, threads=None):
    """Softpick: relu(exp(x - M) - exp(-M)) / (sum |exp(x - M) - exp(-M)| + eps), M = max(0, max x)."""
    return _apply(_smax.softpick, [(x, "x")], axis, out, threads, (_real(eps, "eps"),))


def ssmax(x, axis=-1, *, s, b=0.0, out=None, threads=None):
    """Scalable-Softmax: softmax((s * log(n) + b) * x), n the length along axis."""
    return _apply(_smax.ssmax, [(x, "x")], axis, out, threads, (_real(s, "s"), _real(b, "b")))


def gumbel_softmax(logits, axis=-1, *, tau, seed, hard=False, out=None, threads=None):
    """softmax((logits + g) / tau), g Gumbel noise from seed; hard: the one-hot of the argmax.

    A 1-D input draws with ``seed`` itself (the C++ single-vector call); in an N-D
    input, the row at flat index r (the other axes in C order) draws with
    gumbel_row_seed(seed, r).
    """
    a = _as_array(logits, "logits")
    vector = a.ndim == 1
    return _apply(_smax.gumbel_softmax, [(logits, "logits")], axis, out, threads,
                  (_real(tau, "tau"), _seed(seed, "seed"), bool(hard), vector))


def gumbel_noise(shape=None, *, seed, offset=0, dtype=_np.float32, out=None):
    """Gumbel(0, 1) noise: element i (C order) is g(seed, offset + i), the same bits on every ISA."""
    seed, offset = _seed(seed, "seed"), _seed(offset, "offset")
    if out is None:
        if shape is None:
            raise ValueError("gumbel_noise needs shape or out")
        dt = _np.dtype(dtype)
        if dt not in _DTYPES:
            raise TypeError(f"dtype must be float32, float64 or float16, got {dt}")
        o = _np.empty(shape, dt)
        _smax.gumbel_noise(o.reshape(1, -1), seed, offset)
        return o
    o = _as_array(out, "out", writable=True)
    if shape is not None and tuple(_np.atleast_1d(shape)) != o.shape:
        raise ValueError(f"out has shape {o.shape}, shape is {shape}")
    if o.flags.c_contiguous:
        _smax.gumbel_noise(o.reshape(1, -1), seed, offset)
    else:
        scratch = _np.empty(o.shape, o.dtype)
        _smax.gumbel_noise(scratch.reshape(1, -1), seed, offset)
        o[...] = scratch
    return out


# ---------------------------------------------------------------- backward
# Vector-Jacobian products: dx = J^T dy. out may be any one of the inputs.

def softmax_backward(y, dy, axis=-1, *, out=None, threads=None):
    """dx = y * (dy - sum(dy * y)), y = softmax(x)."""
    return _apply(_smax.softmax_backward, [(y, "y"), (dy, "dy")], axis, out, threads)


def log_softmax_backward(y, dy, axis=-1, *, out=None, threads=None):
    """dx = dy - exp(y) * sum(dy), y = log_softmax(x)."""
    return _apply(_smax.log_softmax_backward, [(y, "y"), (dy, "dy")], axis, out, threads)


def sparsemax_backward(y, dy, axis=-1, *, out=None, threads=None):
    """dx_i = [y_i > 0] (dy_i - mean of dy over the support), y = sparsemax(x)."""
    return _apply(_smax.sparsemax_backward, [(y, "y"), (dy, "dy")], axis, out, threads)


def entmax_backward(y, dy, axis=-1, *, alpha=1.5, out=None, threads=None):
    """The VJP of alpha-entmax from its output y (entmax15: alpha = 1.5)."""
    return _apply(_smax.entmax_backward, [(y, "y"), (dy, "dy")], axis, out, threads,
                  (_real(alpha, "alpha"),))


def stablemax_backward(x, dy, axis=-1, *, out=None, threads=None):
    """The VJP of stablemax, from its input x."""
    return _apply(_smax.stablemax_backward, [(x, "x"), (dy, "dy")], axis, out, threads)


def softpick_backward(x, y, dy, axis=-1, *, eps=1e-8, out=None, threads=None):
    """The VJP of softpick, from its input x and output y."""
    return _apply(_smax.softpick_backward, [(x, "x"), (y, "y"), (dy, "dy")], axis, out, threads,
                  (_real(eps, "eps"),))
