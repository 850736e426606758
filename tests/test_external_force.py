"""The external-force port of ``dyn4_step`` (``f_ext``: body-frame Fx, Fy and yaw moment Mz):
its physics, its books line, its gradients, a golden rollout (states and VJP to 1e-9) and the
Numba substep reproducing it.

Regenerate the golden only on purpose: ``DYN4_GOLDEN_WRITE=1 python -m pytest tests/test_external_force.py``.
"""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from dyn4_gym.engine import numba_plant
from dyn4_gym.model.books import BOOK_LINES
from dyn4_gym.ground import Flat, Hills
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step

D = torch.float64
GOLDEN = Path(__file__).parent / "data" / "dyn4_ext_rollout_golden.json"
T = 60


def _inputs():
    t = torch.arange(T, dtype=D)
    u = torch.stack((0.15 * torch.sin(t / 10), torch.full_like(t, 1.0)), -1)
    f = torch.stack((torch.full_like(t, -2500.0), 1200.0 * torch.sin(t / 7), torch.full_like(t, 800.0)), -1)
    return u, f


def _rollout(p, x0, u, f, g=None):
    xs = [x0]
    for k in range(T):
        xs.append(dyn4_step(xs[-1], u[k], p, g, hdt=0.01, f_ext=f[k]))
    return torch.stack(xs)


def test_golden_rollout_and_vjp():
    p = dyn4_params(HUMVEE, dtype=D)
    x0 = dyn4_rest(p).clone()
    x0[3] = 12.0
    u, f = _inputs()
    x0.requires_grad_(True)
    u.requires_grad_(True)
    f.requires_grad_(True)
    xs = _rollout(p, x0, u, f)
    w = torch.linspace(-1.0, 1.0, 14, dtype=D)
    loss = (xs[1:] * w).sum()
    gx0, gu, gf = torch.autograd.grad(loss, (x0, u, f))
    if os.environ.get("DYN4_GOLDEN_WRITE"):
        GOLDEN.write_text(json.dumps({
            "about": "dyn4_step with f_ext: Humvee float64, flat ground, hdt 0.01, 60 substeps from rest at 12 m/s; "
                     "loss = sum_t x_t . linspace(-1, 1, 14); tests/test_external_force.py",
            "u": u.detach().tolist(), "f_ext": f.detach().tolist(), "states": xs.detach().tolist(),
            "vjp_x0": gx0.tolist(), "vjp_u": gu.tolist(), "vjp_f_ext": gf.tolist()}))
    gold = json.loads(GOLDEN.read_text())
    np.testing.assert_allclose(xs.detach().numpy(), gold["states"], rtol=1e-9, atol=1e-9)
    for name, got in (("vjp_x0", gx0), ("vjp_u", gu), ("vjp_f_ext", gf)):
        np.testing.assert_allclose(got.numpy(), gold[name], rtol=1e-9, atol=1e-12, err_msg=name)
    # the Numba substep reproduces the same rollout
    packed, ter = numba_plant.pack_params(p), numba_plant.pack_terrain(Flat(), 1)
    x = x0.detach().numpy()[None]
    for k in range(T):
        x = numba_plant.dyn4_step_np(x, u[k].detach().numpy()[None], packed, ter, f_ext=f[k].detach().numpy()[None])
    np.testing.assert_allclose(x[0], gold["states"][-1], rtol=1e-9, atol=1e-9)


def test_a_tow_force_accelerates_the_car_by_f_over_m():
    p = dyn4_params(HUMVEE, dtype=D)
    x0 = dyn4_rest(p).clone()
    x0[3] = 8.0
    u = torch.tensor([0.0, 0.0], dtype=D)
    m = float(p.m)
    pull = torch.tensor([m * 1.0, 0.0, 0.0], dtype=D)  # 1 m/s^2 worth of tow
    a, b = x0, x0
    for _ in range(100):  # 1 s
        a = dyn4_step(a, u, p, hdt=0.01, f_ext=pull)
        b = dyn4_step(b, u, p, hdt=0.01)
    assert float(a[3] - b[3]) == pytest.approx(1.0, rel=0.03)  # drag grows a little with the speed
    assert abs(float(a[4])) < 1e-9 and abs(float(a[5])) < 1e-9  # straight pull, no side or yaw
    # a yaw moment alone turns the car the way it points
    turn = dyn4_step(x0, u, p, hdt=0.01, f_ext=torch.tensor([0.0, 0.0, 5000.0], dtype=D))
    assert float(turn[5]) > 0


def test_the_books_close_with_the_external_line():
    p = dyn4_params(HUMVEE, dtype=D)
    g = Hills()
    x = dyn4_rest(p, g, (4,)).clone()
    x[:, 3] = torch.tensor([5.0, 10.0, 15.0, 20.0], dtype=D)
    u, f = _inputs()
    ext = res = flow = 0.0
    for k in range(T):
        x, b = dyn4_step(x, u[k], p, g, hdt=0.01, books=True, f_ext=f[k].expand(4, 3))
        ext += b.external
        res += b.residual
        flow = flow + b.supplied.abs() + b.dissipated + b.external.abs()
    assert (ext < 0).all()  # the tow pulls back on a car driving forward
    assert float((res.abs() / flow).max()) < 5e-3
    # f_ext None, or zeros, is the plant without the port, bit for bit
    x0 = dyn4_rest(p, g, (4,)).clone()
    x0[:, 3] = 10.0
    a = dyn4_step(x0, u[0], p, g, books=True)
    z = dyn4_step(x0, u[0], p, g, books=True, f_ext=torch.zeros(4, 3, dtype=D))
    assert torch.equal(a[0], z[0]) and float(z[1].external.abs().max()) == 0.0
    with pytest.raises(ValueError, match="f_ext"):
        dyn4_step(x0, u[0], p, g, f_ext=torch.zeros(4, 2, dtype=D))


def test_gradcheck_through_the_port():
    p = dyn4_params(HUMVEE, dtype=D)
    x0 = dyn4_rest(p).clone()
    x0[3] = 9.0
    x0[4] = 0.4  # sliding a little
    u = torch.tensor([0.1, 0.5], dtype=D)

    def fn(f):
        x = x0
        for _ in range(5):
            x = dyn4_step(x, u, p, hdt=0.01, f_ext=f)
        return x[3:6]

    f = torch.tensor([300.0, -200.0, 150.0], dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(fn, (f,), eps=1e-3, atol=1e-7, rtol=1e-5)


def test_numba_port_equals_torch_on_rough_terrain():
    from dyn4_gym.envs import EnvConfig, TaskCore

    B = 64
    core = TaskCore(EnvConfig(dtype="float64"))
    st = core.new_state(torch.arange(B), torch.zeros(B, dtype=torch.long))
    gen = torch.Generator().manual_seed(1)
    x = st.x.clone()
    x[:, 3] = torch.rand(B, generator=gen, dtype=D) * 20
    x[:, 4] = torch.randn(B, generator=gen, dtype=D)
    u = torch.stack((torch.randn(B, generator=gen, dtype=D) * 0.3, torch.randn(B, generator=gen, dtype=D) * 3), -1)
    f = torch.randn(B, 3, generator=gen, dtype=D) * torch.tensor([3000.0, 3000.0, 4000.0], dtype=D)
    for grade in (False, True):
        p = dyn4_params(HUMVEE, dtype=D, grade_force=grade)
        x1, b = dyn4_step(x, u, p, st.terrain, books=True, f_ext=f)
        y, bk = numba_plant.dyn4_step_np(x.numpy(), u.numpy(), numba_plant.pack_params(p),
                                         numba_plant.pack_terrain(st.terrain, B), books=True, f_ext=f.numpy())
        assert np.max(np.abs(y - x1.numpy()) / np.maximum(np.abs(x1.numpy()), 1.0)) < 1e-12
        j = BOOK_LINES.index("external")
        assert np.max(np.abs(bk[:, j] - b.external.numpy())) / 1e5 < 1e-12
        assert math.isfinite(float(b.residual.abs().max()))
