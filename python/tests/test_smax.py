"""smax from Python: every function against torch or a numpy reference, every
layout (axis, strides, out=, in place, buffers, __dlpack__), the errors."""
import array
import math
import threading

import numpy as np
import pytest

import smax

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=1e-7), np.float64: dict(rtol=1e-12, atol=1e-15)}


def logits(rng, shape, dtype, scale=4.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


# ---------------------------------------------------------------- references

def np_sparsemax(x, axis=-1):
    z = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    zs = -np.sort(-z, axis=-1)
    k = np.arange(1, z.shape[-1] + 1)
    cssv = np.cumsum(zs, axis=-1) - 1
    rho = np.sum(zs - cssv / k > 0, axis=-1, keepdims=True)
    tau = np.take_along_axis(cssv, rho - 1, axis=-1) / rho
    return np.moveaxis(np.maximum(z - tau, 0), -1, axis)


def np_entmax15(x, axis=-1):
    # Peters et al. 2019, sort-based exact 1.5-entmax
    z = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    z = (z - z.max(axis=-1, keepdims=True)) / 2
    zs = -np.sort(-z, axis=-1)
    rho = np.arange(1, z.shape[-1] + 1)
    mean = np.cumsum(zs, axis=-1) / rho
    mean_sq = np.cumsum(zs ** 2, axis=-1) / rho
    ss = rho * (mean_sq - mean ** 2)
    delta = np.clip((1 - ss) / rho, 0, None)
    tau = mean - np.sqrt(delta)
    support = np.sum(tau <= zs, axis=-1, keepdims=True)
    tau_star = np.take_along_axis(tau, support - 1, axis=-1)
    return np.moveaxis(np.clip(z - tau_star, 0, None) ** 2, -1, axis)


def np_entmax_bisect(x, alpha, axis=-1, iters=200):
    z = np.moveaxis(np.asarray(x, np.float64), axis, -1) * (alpha - 1)
    hi = z.max(axis=-1, keepdims=True)
    lo = hi - 1.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        s = (np.clip(z - mid, 0, None) ** (1 / (alpha - 1))).sum(axis=-1, keepdims=True)
        lo, hi = np.where(s >= 1, mid, lo), np.where(s >= 1, hi, mid)
    p = np.clip(z - lo, 0, None) ** (1 / (alpha - 1))
    return np.moveaxis(p / p.sum(axis=-1, keepdims=True), -1, axis)


def np_stablemax(x, axis=-1):
    x = np.asarray(x, np.float64)
    s = np.where(x >= 0, x + 1, 1 / (1 - x))
    return s / s.sum(axis=axis, keepdims=True)


def np_softpick(x, eps, axis=-1):
    x = np.asarray(x, np.float64)
    m = np.maximum(x.max(axis=axis, keepdims=True), 0)
    a = np.exp(x - m) - np.exp(-m)
    return np.maximum(a, 0) / (np.abs(a).sum(axis=axis, keepdims=True) + eps)


# ------------------------------------------------------------------ forward

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("algorithm", smax.ALGORITHMS)
def test_softmax_matches_torch(rng, dtype, algorithm):
    x = logits(rng, (7, 131), dtype)
    y = smax.softmax(x, algorithm=algorithm)
    assert isinstance(y, np.ndarray) and y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, torch.softmax(torch.from_numpy(x), -1).numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_axes_match_torch(rng, dtype, axis):
    x = logits(rng, (5, 6, 33), dtype)
    t = torch.from_numpy(x)
    np.testing.assert_allclose(smax.softmax(x, axis), torch.softmax(t, axis).numpy(), **TOL[dtype])
    np.testing.assert_allclose(smax.log_softmax(x, axis=axis), torch.log_softmax(t, axis).numpy(),
                               rtol=TOL[dtype]["rtol"], atol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sparse_family_against_sort(rng, dtype):
    x = logits(rng, (9, 70), dtype, scale=1.0)
    tol = dict(rtol=1e-4, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(smax.sparsemax(x), np_sparsemax(x), **tol)
    np.testing.assert_allclose(smax.sparsemax(x, 0), np_sparsemax(x, 0), **tol)
    np.testing.assert_allclose(smax.entmax15(x), np_entmax15(x), **tol)
    np.testing.assert_allclose(smax.entmax_bisect(x, alpha=1.5), np_entmax15(x), **tol)
    np.testing.assert_allclose(smax.entmax_bisect(x, alpha=1.3, n_iter=60), np_entmax_bisect(x, 1.3), **tol)
    np.testing.assert_allclose(smax.entmax_bisect(x, alpha=2.0), np_sparsemax(x), **tol)
    assert (smax.sparsemax(x) == 0).any()  # sparse indeed


@pytest.mark.parametrize("dtype", DTYPES)
def test_variants_against_formulas(rng, dtype):
    x = logits(rng, (4, 50), dtype, scale=3.0)
    tol = dict(rtol=1e-5, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(smax.stablemax(x), np_stablemax(x), **tol)
    np.testing.assert_allclose(smax.log_stablemax(x), np.log(np_stablemax(x)), rtol=tol["rtol"], atol=1e-5)
    np.testing.assert_allclose(smax.softpick(x, eps=1e-3), np_softpick(x, 1e-3), **tol)
    c = 0.5 * math.log(50) + 0.25
    np.testing.assert_allclose(smax.ssmax(x, s=0.5, b=0.25), torch.softmax(torch.from_numpy(x) * c, -1).numpy(),
                               **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gumbel_softmax_distribution_like_torch(rng, dtype):
    # A batch of equal rows: the hard samples' frequencies must follow
    # softmax(logits), as torch.nn.functional.gumbel_softmax's do; the soft
    # samples' mean must agree with torch's within the sampling error.
    F = torch.nn.functional
    base = np.array([1.0, 0.0, -1.0, 2.0, 0.5], dtype)
    rows = 20000
    x = np.tile(base, (rows, 1))
    p = torch.softmax(torch.from_numpy(base).double(), 0).numpy()
    hard = smax.gumbel_softmax(x, tau=1.0, seed=7, hard=True)
    assert set(np.unique(hard)) == {0.0, 1.0} and (hard.sum(1) == 1).all()
    torch.manual_seed(7)
    thard = F.gumbel_softmax(torch.from_numpy(x).double(), tau=1.0, hard=True).numpy()
    for counts in (hard.sum(0), thard.sum(0)):
        chi2 = (((counts - rows * p) ** 2) / (rows * p)).sum()
        assert chi2 < 20.5, chi2  # 4 degrees of freedom: p = 0.0004
    soft = smax.gumbel_softmax(x, tau=0.5, seed=8)
    tsoft = F.gumbel_softmax(torch.from_numpy(x).double(), tau=0.5).numpy()
    se = np.sqrt(soft.var(0) / rows + tsoft.var(0) / rows)
    assert (np.abs(soft.mean(0) - tsoft.mean(0)) < 5 * se).all()
    np.testing.assert_allclose(soft.sum(1), 1, rtol=1e-5)
    # rows draw independently (gumbel_row_seed), the same seed repeats
    assert not np.array_equal(soft[0], soft[1])
    assert np.array_equal(soft, smax.gumbel_softmax(x, tau=0.5, seed=8))


def test_gumbel_1d_is_the_single_vector_call():
    x = np.linspace(-2, 2, 37, dtype=np.float32)
    y1 = smax.gumbel_softmax(x, tau=0.8, seed=3)
    # N-D rows draw with gumbel_row_seed(seed, r), as the C++ batched call
    rows = smax.gumbel_softmax(np.stack([x, x]), tau=0.8, seed=3)
    np.testing.assert_array_equal(rows[0], smax.gumbel_softmax(x, tau=0.8, seed=smax.gumbel_row_seed(3, 0)))
    np.testing.assert_array_equal(rows[1], smax.gumbel_softmax(x, tau=0.8, seed=smax.gumbel_row_seed(3, 1)))
    g = smax.gumbel_noise(37, seed=3, dtype=np.float32)
    ref = torch.softmax((torch.from_numpy(x) + torch.from_numpy(g)) / 0.8, 0).numpy()
    np.testing.assert_allclose(y1, ref, rtol=1e-5, atol=1e-7)


def test_gumbel_noise_offsets_and_statistics():
    g = smax.gumbel_noise((1000, 10), seed=11, dtype=np.float64)
    np.testing.assert_array_equal(smax.gumbel_noise(5000, seed=11, offset=2500, dtype=np.float64),
                                  g.reshape(-1)[2500:7500])
    assert abs(g.mean() - 0.5772156649) < 0.05 and abs(g.var() - math.pi ** 2 / 6) < 0.1
    out = np.zeros((20, 10), np.float32)[:, ::2]  # strided out
    smax.gumbel_noise(out=out, seed=11)
    np.testing.assert_array_equal(out, smax.gumbel_noise((20, 5), seed=11))


# ----------------------------------------------------------------- backward

def torch_vjp(f, x, dy):
    t = torch.from_numpy(x).requires_grad_(True)
    f(t).backward(torch.from_numpy(dy))
    return t.grad.numpy()


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_against_torch_autograd(rng, dtype):
    x = logits(rng, (6, 40), dtype, scale=1.0)
    dy = rng.standard_normal(x.shape).astype(dtype)
    tol = dict(rtol=1e-4, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-13)
    y = smax.softmax(x)
    np.testing.assert_allclose(smax.softmax_backward(y, dy), torch_vjp(lambda t: torch.softmax(t, -1), x, dy), **tol)
    ly = smax.log_softmax(x)
    np.testing.assert_allclose(smax.log_softmax_backward(ly, dy),
                               torch_vjp(lambda t: torch.log_softmax(t, -1), x, dy), **tol)
    sy = smax.stablemax(x)
    stab = lambda t: (lambda s: s / s.sum(-1, keepdim=True))(torch.where(t >= 0, t + 1, 1 / (1 - t)))  # noqa: E731
    np.testing.assert_allclose(smax.stablemax_backward(x, dy), torch_vjp(stab, x, dy), **tol)
    del sy
    py = smax.softpick(x, eps=1e-2)

    def tpick(t):
        m = torch.clamp(t.max(-1, keepdim=True).values, min=0)
        a = torch.exp(t - m) - torch.exp(-m)
        return torch.relu(a) / (a.abs().sum(-1, keepdim=True) + 1e-2)
    np.testing.assert_allclose(smax.softpick_backward(x, py, dy, eps=1e-2), torch_vjp(tpick, x, dy), **tol)
    # sparsemax / entmax: on the support the VJP of the projection
    y = smax.sparsemax(x)
    supp = y > 0
    ref = np.where(supp, dy - (dy * supp).sum(-1, keepdims=True) / supp.sum(-1, keepdims=True), 0)
    np.testing.assert_allclose(smax.sparsemax_backward(y, dy), ref, **tol)
    y = smax.entmax15(x)
    g = np.sqrt(y)
    ref = g * dy - g * (g * dy).sum(-1, keepdims=True) / g.sum(-1, keepdims=True)
    np.testing.assert_allclose(smax.entmax_backward(y, dy, alpha=1.5), ref, **tol)


# ------------------------------------------------------------------ layouts

@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_inputs_and_outputs(rng, dtype):
    big = logits(rng, (12, 80), dtype)
    for x in (big[:, ::2], big[::3], big.T, big[2:9, 5:70], big[::-1]):
        ref = smax.softmax(np.ascontiguousarray(x))
        np.testing.assert_array_equal(smax.softmax(x), ref)
        out = np.full((x.shape[0], 2 * x.shape[1]), 9, dtype)[:, ::2]
        assert smax.softmax(x, out=out) is out
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(np.full((x.shape[0], 2 * x.shape[1]), 9, dtype)[:, 1::2], 9)
    # axis 0 of a C-order array: computed right, through a scratch copy
    np.testing.assert_array_equal(smax.softmax(big, 0), smax.softmax(np.ascontiguousarray(big.T)).T)


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_and_in_place_no_copy(rng, dtype):
    x = logits(rng, (3, 100), dtype)
    ref = smax.softmax(x)
    out = np.empty_like(x)
    assert smax.softmax(x, out=out) is out
    np.testing.assert_array_equal(out, ref)
    xc = x.copy()
    assert smax.softmax(xc, out=xc) is xc  # in place
    np.testing.assert_array_equal(xc, ref)
    # backward in place: dx over dy
    dy = rng.standard_normal(x.shape).astype(dtype)
    want = smax.softmax_backward(ref, dy)
    smax.softmax_backward(ref, dy, out=dy)
    np.testing.assert_array_equal(dy, want)
    # partial overlap is read from a copy, not corrupted
    buf = logits(rng, (1, 101), dtype)[0]
    want = smax.softmax(buf[:-1].copy())
    smax.softmax(buf[:-1], out=buf[1:])
    np.testing.assert_array_equal(buf[1:], want)


def test_unaligned_buffers(rng):
    raw = bytearray(4 * 65 + 1)
    x = np.frombuffer(raw, np.float32, count=64, offset=1)  # not aligned to 4 bytes
    assert not x.flags.aligned
    x[...] = logits(rng, 64, np.float32)  # (a writable buffer)
    want = smax.softmax(x.copy())
    np.testing.assert_array_equal(smax.softmax(x), want)
    out = np.frombuffer(bytearray(4 * 65 + 1), np.float32, count=64, offset=1)
    smax.softmax(x, out=out)
    np.testing.assert_array_equal(out, want)


def test_buffer_protocol_and_dlpack(rng):
    vals = [0.5, -1.0, 3.0, 2.0]
    want = smax.softmax(np.array(vals, np.float32))
    np.testing.assert_array_equal(smax.softmax(array.array("f", vals)), want)
    np.testing.assert_array_equal(smax.softmax(memoryview(array.array("f", vals))), want)
    out = array.array("f", [0] * 4)
    smax.softmax(array.array("f", vals), out=out)  # a writable buffer as out
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), want)

    class OnlyDlpack:  # any producer with __dlpack__, not a tensor
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    np.testing.assert_array_equal(smax.softmax(OnlyDlpack(torch.tensor(vals))), want)


def test_torch_tensors_in_and_out_share_memory(rng):
    t = torch.randn(4, 64)
    y = smax.softmax(t, 1)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    torch.testing.assert_close(y, torch.softmax(t, 1), rtol=2e-5, atol=1e-7)
    out = torch.empty(4, 64)
    assert smax.softmax(t, out=out) is out
    assert torch.equal(out, y)
    tt = t.clone()
    smax.softmax(tt, out=tt)
    assert torch.equal(tt, y)
    assert smax.softmax(t.t(), 0).shape == (64, 4)  # non-contiguous tensor


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (1,), (3, 1)])
def test_empty_and_tiny(shape):
    x = np.ones(shape, np.float32)
    y = smax.softmax(x)
    assert y.shape == shape
    np.testing.assert_array_equal(y, 1.0 if shape[-1] == 1 else y)


def test_threads_give_the_same_bits(rng):
    x = logits(rng, (64, 3000), np.float32)
    one = smax.softmax(x)
    for th in (0, 2, 3):
        np.testing.assert_array_equal(smax.softmax(x, threads=th), one)
    np.testing.assert_array_equal(smax.entmax15(x, threads=2), smax.entmax15(x))


def test_python_threads_at_once(rng):
    # The GIL is released in the kernel: threads calling at once all get right answers.
    x = logits(rng, (32, 20000), np.float32)
    ref = smax.softmax(x)
    results = [None] * 4

    def work(i):
        results[i] = smax.softmax(x)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    for r in results:
        np.testing.assert_array_equal(r, ref)


def test_every_isa_same_answer(rng):
    x = logits(rng, (3, 257), np.float64)
    ref = torch.softmax(torch.from_numpy(x), -1).numpy()
    try:
        for isa in smax.available_isas():
            smax.set_isa(isa)
            assert smax.active_isa() == isa
            np.testing.assert_allclose(smax.softmax(x), ref, rtol=1e-12)
    finally:
        smax.set_isa(None)
    with pytest.raises(ValueError, match="bogus"):
        smax.set_isa("bogus")


def test_special_values():
    x = np.array([[1, np.inf, 2, np.inf], [-np.inf] * 4, [1, np.nan, 2, 3]], np.float32)
    y = smax.softmax(x)
    np.testing.assert_array_equal(y[0], [0, 0.5, 0, 0.5])
    np.testing.assert_array_equal(y[1], 0)
    assert np.isnan(y[2]).all()


# ------------------------------------------------------------------- errors

def test_errors_name_the_argument(rng):
    x = logits(rng, (3, 8), np.float32)
    with pytest.raises(TypeError, match="x must be float32, float64, float16 or bfloat16"):
        smax.softmax(np.ones(4, np.int64))
    with pytest.raises(TypeError, match="x must be float32, float64, float16 or bfloat16"):
        smax.softmax(np.ones(4, np.uint16))  # bfloat16 only from a torch tensor
    with pytest.raises(TypeError, match="dy is float16, y is bfloat16"):
        smax.softmax_backward(torch.ones(4, dtype=torch.bfloat16), np.ones(4, np.float16))
    with pytest.raises(TypeError, match="x must be an array|x must be float32"):
        smax.softmax(object())
    with pytest.raises(ValueError, match="axis"):
        smax.softmax(x, 2)
    with pytest.raises(TypeError, match="axis"):
        smax.softmax(x, 1.0)
    with pytest.raises(ValueError, match="at least one dimension"):
        smax.softmax(np.float32(3))
    with pytest.raises(ValueError, match="out has shape"):
        smax.softmax(x, out=np.empty((3, 9), np.float32))
    with pytest.raises(TypeError, match="out is float64"):
        smax.softmax(x, out=np.empty((3, 8), np.float64))
    ro = np.empty((3, 8), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        smax.softmax(x, out=ro)
    with pytest.raises(ValueError, match="algorithm"):
        smax.softmax(x, algorithm="fast")
    with pytest.raises(ValueError, match="threads"):
        smax.softmax(x, threads=-1)
    with pytest.raises(TypeError, match="threads"):
        smax.softmax(x, threads="2")
    with pytest.raises(ValueError, match="alpha"):
        smax.entmax_bisect(x, alpha=0.5)
    with pytest.raises(ValueError, match="n_iter"):
        smax.entmax_bisect(x, n_iter=-1)
    with pytest.raises(TypeError, match="alpha"):
        smax.entmax_bisect(x, alpha="1.5")
    with pytest.raises(ValueError, match="eps"):
        smax.softpick(x, eps=-1.0)
    with pytest.raises(ValueError, match="tau"):
        smax.gumbel_softmax(x, tau=0.0, seed=1)
    with pytest.raises(ValueError, match="seed"):
        smax.gumbel_softmax(x, tau=1.0, seed=-1)
    with pytest.raises(ValueError, match="dy has shape"):
        smax.softmax_backward(x, x[:, :4])
    with pytest.raises(TypeError, match="dy is float64"):
        smax.softmax_backward(x, x.astype(np.float64))
    with pytest.raises(TypeError):
        smax.softmax(x, -1, "two_pass")  # parameters are keywords
    # nothing written on a bad argument
    out = np.full((3, 8), 7, np.float32)
    with pytest.raises(ValueError):
        smax.entmax_bisect(x, alpha=0.5, out=out)
    assert (out == 7).all()



def test_example_runs():
    import pathlib
    import runpy
    runpy.run_path(str(pathlib.Path(__file__).parent.parent / "examples" / "attention_sampling.py"),
                   run_name="__main__")


# ------------------------------------------------------------------ 16-bit

# Every function on 16-bit input but softmax is the float32 kernel on the
# widened values, each output rounded once to nearest even: numpy's float16
# and torch's bfloat16 conversions round the same way, so the bits must match.
# (softmax to 16-bit outputs: test_sixteen_bit_softmax_within_one_ulp.)
SIXTEEN = [
    ("log_softmax", lambda f, x: f.log_softmax(x), 1),
    ("sparsemax", lambda f, x: f.sparsemax(x, 0), 1),
    ("entmax15", lambda f, x: f.entmax15(x), 1),
    ("entmax_bisect", lambda f, x: f.entmax_bisect(x, alpha=1.3), 1),
    ("stablemax", lambda f, x: f.stablemax(x), 1),
    ("softpick", lambda f, x: f.softpick(x, eps=1e-6), 1),
    ("ssmax", lambda f, x: f.ssmax(x, s=0.5, b=0.1), 1),
    ("gumbel_softmax", lambda f, x: f.gumbel_softmax(x, tau=0.5, seed=3), 1),
    ("softmax_backward", lambda f, y, dy: f.softmax_backward(y, dy), 2),
    ("entmax_backward", lambda f, y, dy: f.entmax_backward(y, dy), 2),
    ("softpick_backward", lambda f, x, y, dy: f.softpick_backward(x, y, dy), 3),
]


@pytest.mark.parametrize("name,call,arity", SIXTEEN, ids=[c[0] for c in SIXTEEN])
def test_float16_is_the_float_kernel_rounded_once(rng, name, call, arity):
    args16 = [logits(rng, (5, 37), np.float16) for _ in range(arity)]
    got = call(smax, *args16)
    assert got.dtype == np.float16
    want = call(smax, *[a.astype(np.float32) for a in args16]).astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("name,call,arity", SIXTEEN, ids=[c[0] for c in SIXTEEN])
def test_torch_bfloat16_is_the_float_kernel_rounded_once(rng, name, call, arity):
    args = [torch.from_numpy(logits(rng, (4, 29), np.float32)).to(torch.bfloat16) for _ in range(arity)]
    got = call(smax, *args)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    want = call(smax, *[a.float() for a in args]).to(torch.bfloat16)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_sixteen_bit_softmax_within_one_ulp(rng):
    # softmax to a 16-bit output computes its terms with the cheaper exp its
    # rounding allows: each output within one 16-bit ulp of the float32
    # kernel's (which is within 1e-6 of exact), not always its rounding.
    x16 = logits(rng, (7, 301), np.float16)
    got = smax.softmax(x16).astype(np.float64)
    want = smax.softmax(x16.astype(np.float32)).astype(np.float64)
    # one ulp of v: 2^(floor(log2 v) - 10), 2^-24 below float16's normal range
    ulp = np.exp2(np.floor(np.log2(np.maximum(want, 2.0**-14))) - 10)
    assert np.all(np.abs(got - want) <= ulp + 2e-6 * want + 1e-30)
    xb = torch.from_numpy(logits(rng, (5, 257), np.float32)).to(torch.bfloat16)
    gotb = smax.softmax(xb).double()
    wantb = smax.softmax(xb.float()).double()
    # bfloat16 keeps 8 significant bits: one ulp of v is 2^(floor(log2 v) - 7)
    ulpb = torch.pow(2.0, torch.floor(torch.log2(wantb.clamp_min(2.0**-126))) - 7)
    assert bool(torch.all((gotb - wantb).abs() <= ulpb + 2e-6 * wantb + 1e-30))


def test_sixteen_bit_out_in_place_and_layouts(rng):
    x = torch.from_numpy(logits(rng, (6, 33), np.float32)).to(torch.bfloat16)
    want = smax.softmax(x)
    out = torch.empty_like(x)
    assert smax.softmax(x, out=out) is out and torch.equal(out.view(torch.int16), want.view(torch.int16))
    xt = x.t()  # strided along the axis: copied, the same bits
    assert torch.equal(smax.softmax(xt, 0).view(torch.int16), want.t().view(torch.int16))
    y = x.clone()
    smax.softmax(y, out=y)
    assert torch.equal(y.view(torch.int16), want.view(torch.int16))
    h = logits(rng, (3, 40), np.float16)
    np.testing.assert_array_equal(smax.sparsemax(h, 0).view(np.uint16),
                                  smax.sparsemax(h.astype(np.float32), 0).astype(np.float16).view(np.uint16))
    g = smax.gumbel_noise((2, 8), seed=4, dtype=np.float16)
    np.testing.assert_array_equal(g, smax.gumbel_noise((2, 8), seed=4).astype(np.float16))
