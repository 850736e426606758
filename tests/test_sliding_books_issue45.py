"""Issue 45, item 5 (the part that needs no new state): a locked wheel's energy is booked as tire
sliding, not as brake heat. A wheel's locked share (tire.lock_share) does not turn, so its
brakes do no work and its patch slides at the rolling speed: what the tire takes there is the
powertrain books' ``sliding`` line (both engines, equal to 1e-9: tests/test_powertrain_engine.py
compares every line). Before, a locked stop booked it as brake heat and a negative wheelspin
(2.07 MJ and -1.47 MJ in the issue's stop). The three lines still sum to what they summed to:
``supplied = drive - brakes - wheelspin - sliding``."""

import numpy as np
import torch

from dyn4_gym.ground import Flat
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest
from dyn4_gym.plant.drive import drive_step
from dyn4_gym.plant.powertrain import HUMVEE_POWERTRAIN as PTH
from dyn4_gym.plant.powertrain import powertrain_rest
from dyn4_gym.model.state import DYN4

D = torch.float64


def _stop(brake: float, mu: float, throttle_s: float = 8.0, brake_s: float = 8.0, hdt: float = 0.01):
    """Full throttle for ``throttle_s``, then the brake pedal at ``brake``, straight, on Flat(mu);
    every substep's lines (T, n) by name, and vx (T,)."""
    p = dyn4_params(HUMVEE, dtype=D)
    g = Flat(mu=mu)
    x, s = dyn4_rest(p, g, (1,)), powertrain_rest(PTH, (1,))
    n_thr, n_brk = int(round(throttle_s / hdt)), int(round(brake_s / hdt))
    lines, vx = [], []
    for k in range(n_thr + n_brk):
        on = k >= n_thr
        u = torch.tensor([[0.0, 0.0 if on else 1.0, brake if on else 0.0, 1.0]], dtype=D)
        x, s, bk, pb = drive_step(x, s, u, p, PTH, g, hdt, books=True)
        lines.append({**{k2: float(v[0]) for k2, v in bk.as_dict().items()},
                      **{k2: float(v[0]) for k2, v in pb.as_dict().items()}})
        vx.append(float(x[0, DYN4.VX]))
    return {k: np.array([r[k] for r in lines]) for k in lines[0]}, np.array(vx), n_thr, p


def test_a_locked_stop_books_sliding_not_brake_heat():
    """Full brake on mu 0.3 from speed: the wheels lock, the brakes book (next to) nothing and the
    sliding line carries the stop's energy; under the throttle (no brake, no lock) the sliding
    line is exactly 0; every substep's lines sum as before."""
    b, vx, n0, p = _stop(brake=1.0, mu=0.3)
    assert vx[n0 - 1] > 12.0 and abs(vx[-1]) < 1e-6  # it was fast (14.5 m/s), and it slid to rest
    assert np.all(b["sliding"][:n0] == 0.0)
    stop = slice(n0, None)
    assert np.all(b["sliding"] >= -1e-9 * np.abs(b["supplied"]).max())
    slide, heat = b["sliding"][stop].sum(), b["brakes"][stop].sum()
    ke = 0.5 * float(p.m) * vx[n0 - 1] ** 2
    assert heat < 0.02 * slide, (heat, slide)  # measured: 0 (every wheel locked from the first substep)
    # the body's kinetic energy less drag and the rest (measured 0.92 of it); the rotating parts'
    # share, which the lumped model keeps at the road speed, is released through the wheelspin line
    assert 0.8 * ke < slide < ke, (slide, ke)
    flow = np.abs(b["supplied"]) + np.abs(b["drive"]) + np.abs(b["brakes"]) + 1.0
    gap = b["supplied"] - (b["drive"] - b["brakes"] - b["wheelspin"] - b["sliding"])
    assert np.max(np.abs(gap) / flow) < 1e-9


def test_a_gentle_stop_keeps_its_brake_heat():
    """A quarter of the brake on mu 0.8 locks nothing: the sliding line stays exactly 0 and the
    brakes carry the stop, as they did before the split."""
    b, vx, n0, p = _stop(brake=0.25, mu=0.8)
    assert vx[n0 - 1] > 12.0 and vx[-1] == 0.0
    assert np.all(b["sliding"] == 0.0)
    ke = 0.5 * float(p.m) * vx[n0 - 1] ** 2
    assert b["brakes"][n0:].sum() > 0.5 * ke
