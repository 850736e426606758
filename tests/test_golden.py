"""Golden file: next states and vector-Jacobian products of ``dyn4_step``, float64, to 1e-9.

Regenerate only on purpose: ``DYN4_GOLDEN_WRITE=1 python -m pytest tests/test_golden.py``.

History: regenerated once for three intended changes: the vertical step's springs by
the implicit midpoint rule (every case's heave, roll and pitch change), the drive/brake shares
blended over |a| < 0.05 m/s^2 (the cases whose lagged drive is inside it, and their VJPs at
a = 0), and passive dampers (the bump cases). Cases with no vertical motion, |a| >= 0.05 and
flat ground were unchanged bit for bit by the other two.

Regenerated for locked wheels (issue 22: a wheel braked past its friction bound slides against
its patch's velocity, tire.py): the two split_bump cases, whose hard-braked wheels lock, moved
(next states by up to 1.6e-4, their VJPs by up to 0.38); the cases whose wheels roll are unchanged
but for one VJP entry by 4.4e-16 (rounding of the sliding share's zero terms).
"""

import json
import os
from pathlib import Path

import pytest
import torch

from dyn4_gym.ground import Bump, Flat, MuSplit
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_step
from dyn4_gym.plant import dyn4_state as state

PATH = Path(__file__).parent / "data" / "dyn4_golden.json"
D = torch.float64
PARAMS = {
    "sprung": {},
    "rigid": dict(ride_freq_front=15.0, ride_freq_rear=15.0, damping_ratio_front=1.0, damping_ratio_rear=1.0),
}
GROUNDS = {
    "flat": lambda: Flat(),
    "split_bump": lambda: MuSplit(mu_left=0.8, mu_right=0.3) + Bump(x=3.2, y=0.9, height0=0.08, radius=0.7),
}
CASES = [
    ("sprung", "flat", dict(vx=15.0, vy=0.2, r=0.1, delta=0.05, a=1.0), (0.08, 1.5)),
    ("sprung", "flat", dict(vx=8.0, vy=-3.0, r=0.8, phi=0.03, theta=0.01, delta=0.3, a=-2.0), (0.35, -5.0)),
    ("sprung", "flat", dict(vx=0.05, delta=0.0, a=0.0), (0.0, 0.4)),
    ("sprung", "split_bump", dict(x=2.5, y=0.2, psi=0.05, vx=12.0, vy=0.1, r=0.05, a=-3.0), (0.0, -13.0)),
    ("sprung", "split_bump", dict(x=2.9, y=-0.1, psi=-0.1, vx=6.0, vy=0.4, r=-0.3, z=0.02, phid=0.3, delta=-0.2), (-0.2, 0.5)),
    ("sprung", "split_bump", dict(x=1.0, y=0.0, vx=20.0, z=-0.01, zd=0.2, thetad=-0.1, a=2.0), (0.02, 3.0)),
    ("rigid", "flat", dict(vx=15.0, vy=0.2, r=0.1, delta=0.05, a=1.0), (0.08, 1.5)),
    ("rigid", "flat", dict(vx=8.0, vy=-3.0, r=0.8, delta=0.3, a=-2.0), (0.35, -5.0)),
    ("rigid", "split_bump", dict(x=2.5, y=0.2, psi=0.05, vx=12.0, vy=0.1, r=0.05, a=-3.0), (0.0, -13.0)),
    ("rigid", "split_bump", dict(x=2.9, y=-0.1, psi=-0.1, vx=6.0, vy=0.4, r=-0.3, delta=-0.2), (-0.2, 0.5)),
    ("rigid", "split_bump", dict(x=1.0, vx=0.0), (0.0, 0.0)),
    ("sprung", "split_bump", dict(x=3.0, y=0.9, vx=3.0, phi=0.1, delta=0.4, a=0.5), (0.5, 1.0)),
]
COT = torch.linspace(0.5, 2.0, 14, dtype=D)  # fixed cotangent for the VJP


def _evaluate(pname, gname, named, u):
    p = dyn4_params(HUMVEE, dtype=D, **PARAMS[pname])
    x = state(**named).requires_grad_()
    uu = torch.tensor(u, dtype=D, requires_grad=True)
    x1 = dyn4_step(x, uu, p, GROUNDS[gname]())
    gx, gu = torch.autograd.grad((x1 * COT).sum(), (x, uu))
    return dict(params=pname, ground=gname, x=x.detach().tolist(), u=list(u), next=x1.detach().tolist(),
                vjp_x=gx.tolist(), vjp_u=gu.tolist())


def test_golden():
    results = [_evaluate(*c) for c in CASES]
    if os.environ.get("DYN4_GOLDEN_WRITE") == "1":
        PATH.parent.mkdir(exist_ok=True)
        PATH.write_text(json.dumps(dict(note="dyn4_step next states and VJPs (cotangent linspace(0.5, 2, 14)); "
                                        "regenerate with DYN4_GOLDEN_WRITE=1", cases=results), indent=1))
        pytest.skip("golden file written")
    golden = json.loads(PATH.read_text())["cases"]
    assert len(golden) == len(results) == 12
    for got, want in zip(results, golden):
        assert got["x"] == want["x"] and got["u"] == want["u"]
        for key in ("next", "vjp_x", "vjp_u"):
            g, w = torch.tensor(got[key], dtype=D), torch.tensor(want[key], dtype=D)
            assert torch.allclose(g, w, rtol=1e-9, atol=1e-9), (key, want["params"], want["ground"])
