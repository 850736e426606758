"""The smooth helpers: values and gradients at their singular points."""

import torch

from dyn4_gym._math import atanc, ellipse_factor, softcap, softplus_floor, tanhc
from dyn4_gym.plant.tire import lateral_secant

D = torch.float64


def _grad(f, x0):
    x = torch.tensor(x0, dtype=D, requires_grad=True)
    (g,) = torch.autograd.grad(f(x), x)
    return float(g)


def test_atanc_tanhc_at_zero_and_across_the_series_switch():
    for f, ref in ((atanc, torch.atan), (tanhc, torch.tanh)):
        assert float(f(torch.tensor(0.0, dtype=D))) == 1.0
        assert _grad(f, 0.0) == 0.0
        for x0 in (0.99e-4, 1.01e-4, 0.3, -2.0):
            x = torch.tensor(x0, dtype=D)
            assert abs(float(f(x)) - float(ref(x) / x)) < 1e-15
            h = 1e-6
            fd = (float(f(x + h)) - float(f(x - h))) / (2 * h)
            assert abs(_grad(f, x0) - fd) < 1e-7


def test_softcap_is_identity_inside_and_caps_outside():
    L = torch.tensor(100.0, dtype=D)
    x = torch.tensor([-150.0, -100.0, -50.0, 0.0, 50.0, 89.9, 100.0, 110.0, 1e4], dtype=D)
    y = softcap(x, L)
    assert torch.equal(y[2:6], x[2:6])
    assert abs(float(y[6]) - 97.5) < 1e-12  # 1 - width/4 of the limit at the limit
    assert float(y[7]) == 100.0 and float(y[8]) == 100.0 and float(y[0]) == -100.0
    assert _grad(lambda t: softcap(t, L), 0.0) == 1.0
    # C1 across the blend's ends
    for edge in (90.0, 110.0):
        gl, gr = _grad(lambda t: softcap(t, L), edge - 1e-9), _grad(lambda t: softcap(t, L), edge + 1e-9)
        assert abs(gl - gr) < 1e-6


def test_ellipse_factor_ends_and_slope():
    assert float(ellipse_factor(torch.tensor(0.0, dtype=D))) == 1.0
    assert abs(float(ellipse_factor(torch.tensor(1.0, dtype=D)))) < 1e-15
    g = _grad(ellipse_factor, 1.0)
    assert torch.isfinite(torch.tensor(g)) and g < 0


def test_softplus_floor_positive_and_exact_far_above():
    s = torch.tensor(10.0, dtype=D)
    assert float(softplus_floor(torch.tensor(5000.0, dtype=D), s)) == 5000.0
    assert float(softplus_floor(torch.tensor(-5000.0, dtype=D), s)) > 0.0
    # no underflow to zero far below the floor, in float32 too, and a finite gradient there
    x = torch.tensor([-1e6, -1e3, 0.0], requires_grad=True)
    y = softplus_floor(x, torch.tensor(10.0))
    assert bool((y > 0).all())
    (g,) = torch.autograd.grad(y.sum(), x)
    assert bool(torch.isfinite(g).all())


def test_secant_is_exact_and_smooth_at_zero_lateral_speed():
    """S = -F/w at w = 0 is D B C / ubar, and its gradient there matches central differences."""
    B, C, E = 5.3, 1.4, -0.2
    Dp, v_lat = 6000.0, 0.5
    for u in (0.05, 3.0):
        s0 = float(lateral_secant(torch.tensor(0.0, dtype=D), torch.tensor(u, dtype=D), Dp, B, C, E, v_lat))
        ubar = (u * u + v_lat * v_lat) ** 0.5
        assert abs(s0 / (Dp * B * C / ubar) - 1) < 1e-12
        w = torch.tensor(0.0, dtype=D, requires_grad=True)
        uu = torch.tensor(u, dtype=D, requires_grad=True)
        S = lateral_secant(w, uu, Dp, B, C, E, v_lat)
        gw, gu = torch.autograd.grad(S, (w, uu))
        h = 1e-6
        def s(w_, u_):
            return float(lateral_secant(torch.tensor(w_, dtype=D), torch.tensor(u_, dtype=D), Dp, B, C, E, v_lat))
        assert abs(float(gw) - (s(h, u) - s(-h, u)) / (2 * h)) < 1e-6 * abs(s0)
        assert abs(float(gu) - (s(0.0, u + h) - s(0.0, u - h)) / (2 * h)) < 1e-6 * abs(s0)
    # S >= 0 at any slip, the force saturates past the peak
    w = torch.linspace(-50, 50, 2001, dtype=D)
    S = lateral_secant(w, torch.full_like(w, 5.0), Dp, B, C, E, v_lat)
    assert bool((S >= 0).all())
    F = -S * w
    assert float(F.abs().max()) <= Dp * (1 + 1e-12)
