"""smax.torch: autograd wrappers; gradcheck on every backward in double."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import smax.torch as st  # noqa: E402

gradcheck = torch.autograd.gradcheck


def inputs(shape=(3, 9), seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g, dtype=torch.float64)).requires_grad_(True)


CASES = {
    "softmax": lambda x, d: st.softmax(x, d),
    "softmax_two_pass": lambda x, d: st.softmax(x, d, algorithm="two_pass"),
    "log_softmax": lambda x, d: st.log_softmax(x, d),
    "sparsemax": lambda x, d: st.sparsemax(x, d),
    "entmax15": lambda x, d: st.entmax15(x, d),
    "entmax_bisect": lambda x, d: st.entmax_bisect(x, d, alpha=1.3),
    "stablemax": lambda x, d: st.stablemax(x, d),
    "log_stablemax": lambda x, d: st.log_stablemax(x, d),
    "softpick": lambda x, d: st.softpick(x, d, eps=1e-3),
    "ssmax": lambda x, d: st.ssmax(x, d, s=0.7, b=0.2),
    "gumbel_softmax": lambda x, d: st.gumbel_softmax(x, d, tau=0.6, seed=5),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dim", [-1, 0])
def test_gradcheck(name, dim):
    f = CASES[name]
    x = inputs(seed=sorted(CASES).index(name))
    assert gradcheck(lambda t: f(t, dim), (x,), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_forward_and_grad_match_torch():
    x = inputs((4, 33))
    dy = torch.randn(4, 33, dtype=torch.float64)
    for mine, ref in ((st.softmax, torch.softmax), (st.log_softmax, torch.log_softmax)):
        a = x.detach().clone().requires_grad_(True)
        b = x.detach().clone().requires_grad_(True)
        ya, yb = mine(a, -1), ref(b, -1)
        torch.testing.assert_close(ya, yb, rtol=1e-12, atol=1e-14)
        ya.backward(dy)
        yb.backward(dy)
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-10, atol=1e-13)


def test_float32_and_shapes():
    x = torch.randn(2, 3, 40, requires_grad=True)
    y = st.entmax15(x, 1)
    assert y.dtype == torch.float32 and y.shape == x.shape and y.grad_fn is not None
    y.sum().backward()  # an expanded (stride-0) upstream gradient
    assert x.grad.shape == x.shape
    torch.testing.assert_close(x.grad, torch.zeros_like(x), atol=1e-6, rtol=0)  # rows sum to 1: zero grad


def test_gumbel_hard_is_straight_through():
    x = inputs((5, 7))
    hard = st.gumbel_softmax(x, tau=0.5, seed=3, hard=True)
    assert set(hard.detach().unique().tolist()) == {0.0, 1.0}
    soft_x = x.detach().clone().requires_grad_(True)
    soft = st.gumbel_softmax(soft_x, tau=0.5, seed=3)
    assert torch.equal(hard.detach().argmax(-1), soft.detach().argmax(-1))
    w = torch.randn(5, 7, dtype=torch.float64)
    (hard * w).sum().backward()
    (soft * w).sum().backward()
    torch.testing.assert_close(x.grad, soft_x.grad)


def test_errors():
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        st.softmax(np.ones(3))
    with pytest.raises(ValueError, match="alpha"):
        st.entmax_bisect(torch.ones(3), alpha=0.2)
    with pytest.raises(TypeError, match="float32, float64, float16 or bfloat16"):
        st.softmax(torch.ones(3, dtype=torch.int32))


def test_gumbel_noise_tensor():
    g = st.gumbel_noise((3, 4), seed=1, dtype=torch.float64)
    assert isinstance(g, torch.Tensor) and g.dtype == torch.float64 and g.shape == (3, 4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sixteen_bit_forward_and_backward(dtype):
    x = (3 * torch.randn(4, 19, generator=torch.Generator().manual_seed(5))).to(dtype).requires_grad_()
    y = st.entmax15(x)
    assert y.dtype == dtype
    w = torch.randn(4, 19, generator=torch.Generator().manual_seed(6)).to(dtype)
    (y * w).sum().backward()
    assert x.grad.dtype == dtype
    # the float computation on the same values, rounded once
    xf = x.detach().float().requires_grad_()
    yf = st.entmax15(xf)
    assert torch.equal(y.detach().view(torch.int16), yf.detach().to(dtype).view(torch.int16))
    g = st.gumbel_noise((2, 5), seed=3, dtype=dtype)
    assert g.dtype == dtype and torch.equal(g.float(), st.gumbel_noise((2, 5), seed=3).to(dtype).float())
