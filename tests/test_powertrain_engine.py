"""The powertrain on both engines: the Numba drive step (dyn4_gym.engine.numba_powertrain) against
torch's drive_step over random driver sequences with shifts, reverse and braking (float64, 1e-9),
and both against the golden drive (tests/data/drive_golden.json).

History: the golden drive was rewritten for locked wheels (issue 22, tire.py): its full-brake
spell locks the wheels, which now slide to rest against their patches' velocity instead of being
held by the speed clamp, so the car stops 7.6 cm later (X 62.687 -> 62.764 m) and everything after
moves by that; the drive before the brakes is unchanged. Rewritten again for the wheels' and
driveline's rotating inertia (issue 22, docs/plant.md "Rotating inertia"): 384 kg more on ``vx``
under the powertrain's torques, so the whole drive moves."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from dyn4_gym.engine import numba_plant
from dyn4_gym.engine.numba_powertrain import drive_step_np, pack_powertrain
from dyn4_gym.model.books import BOOK_LINES, POWERTRAIN_LINES
from dyn4_gym.envs import EnvConfig, TaskCore
from dyn4_gym.ground import Flat
from dyn4_gym.plant import HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN, HUMVEE, dyn4_params, dyn4_rest
from dyn4_gym.plant.drive import drive_step
from dyn4_gym.plant.powertrain import HUMVEE_POWERTRAIN as PTH, PT, powertrain_rest

PTH_M998 = PTH

D = torch.float64
GOLDEN = Path(__file__).parent / "data" / "drive_golden.json"


def _driver_sequence(T, B, seed):
    """Driver inputs (T, B, 4): a throttle-heavy start, weaves, braking, a reverse spell on row 0."""
    gen = np.random.default_rng(seed)
    t = np.arange(T)[:, None] * 0.01
    steer = 0.6 * np.sin(2 * np.pi * (0.2 + 0.3 * gen.random(B)) * t + gen.random(B) * 6)
    throttle = np.clip(0.7 + 0.5 * np.sin(2 * np.pi * 0.07 * t + gen.random(B) * 6), 0, 1)
    brake = np.clip(np.sin(2 * np.pi * 0.05 * t + gen.random(B) * 6) - 0.6, 0, 1) * 2
    direction = np.ones((T, B))
    direction[T // 2: 3 * T // 4, 0] = -1.0
    brake[T // 2 - 100: T // 2, 0] = 1.0  # stop before reversing
    return np.stack((steer, throttle, brake, direction), -1)


# issue 45's physical overrun (opt-in): fuel cut, reverse flow driven by the turbine, the direction lockout
PHYSICAL = dict(fuel_cut=True, overrun="turbine", reverse_lockout=1.5)


@pytest.mark.parametrize("ground,preset,physical", [("flat", "m998", False), ("rough", "m998", False),
                                                    ("flat", "chrono", False), ("rough", "m998", True),
                                                    ("flat", "chrono", True)])
def test_numba_drive_step_equals_torch(ground, preset, physical):
    """The Chrono preset has no idle governor and no steering lag: both engines agree there too,
    and with the physical overrun (coasting spells drive the converter backwards)."""
    B, T, hdt = 6, 1200, 0.01
    core = TaskCore(EnvConfig(dtype="float64"))
    st = core.new_state(torch.arange(B), torch.zeros(B, dtype=torch.long))
    g = st.terrain if ground == "rough" else Flat(mu=0.8)
    spec, PTH = (HUMVEE, PTH_M998) if preset == "m998" else (HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN)
    if physical:
        PTH = PTH.replace(**PHYSICAL)
    p = dyn4_params(spec, dtype=D, grade_force=ground == "rough")
    x = st.x.clone()
    s = powertrain_rest(PTH, (B,))
    xn, sn = x.numpy().copy(), s.numpy().copy()
    packed, packed_pt, ter = numba_plant.pack_params(p), pack_powertrain(PTH), numba_plant.pack_terrain(g, B)
    drv = _driver_sequence(T, B, 1)
    gears = set()
    worst_x = worst_b = 0.0
    for k in range(T):
        u = torch.from_numpy(drv[k])
        x, s, bk, pb = drive_step(x, s, u, p, PTH, g, hdt, books=True)
        xn, sn, bkn, pbn = drive_step_np(xn, sn, drv[k], packed, packed_pt, ter, hdt, books=True)
        ref = x.numpy()
        worst_x = max(worst_x, float(np.max(np.abs(xn - ref) / np.maximum(np.abs(ref), 1.0))))
        assert np.array_equal(sn[:, PT.GEAR], s[:, PT.GEAR].numpy()) and np.array_equal(sn[:, 2], s[:, 2].numpy())
        worst_x = max(worst_x, float(np.max(np.abs(sn[:, 0] - s[:, 0].numpy()) / np.maximum(np.abs(s[:, 0].numpy()),
                                                                                            1.0))))
        scale = 1.0 + np.abs(pb.fuel.numpy()) + np.abs(bk.supplied.numpy()) + np.abs(bk.dissipated.numpy())
        for j, name in enumerate(POWERTRAIN_LINES):
            worst_b = max(worst_b, float(np.max(np.abs(pbn[:, j] - getattr(pb, name).numpy()) / scale)))
        for j, name in enumerate(BOOK_LINES):
            worst_b = max(worst_b, float(np.max(np.abs(bkn[:, j] - getattr(bk, name).numpy()) / scale)))
        gears |= set(sn[:, PT.GEAR].astype(int).tolist())
    assert worst_x < 1e-9 and worst_b < 1e-9, (worst_x, worst_b)
    assert {-1, 1, 2}.issubset(gears)  # the sequence shifted and reversed


def _golden_run():
    """The golden drive: from rest, full throttle 6 s with a lane change, brake, reverse, on flat mu 0.8."""
    p = dyn4_params(HUMVEE, dtype=D)
    T, hdt = 1500, 0.01
    u = np.zeros((T, 1, 4))
    t = np.arange(T) * hdt
    u[:, 0, 0] = np.where((t > 3) & (t < 5), 0.3 * np.sin(np.pi * (t - 3)), 0.0)
    u[:, 0, 1] = np.where(t < 6, 1.0, np.where(t > 10, 0.6, 0.0))
    u[:, 0, 2] = np.where((t >= 6) & (t <= 10), 1.0, 0.0)
    u[:, 0, 3] = np.where(t > 10, -1.0, 1.0)
    return p, u, hdt


def _torch_golden_trace():
    p, u, hdt = _golden_run()
    x = dyn4_rest(p, Flat(mu=0.8), (1,))
    s = powertrain_rest(PTH, (1,))
    out = []
    for k in range(u.shape[0]):
        x, s, bk, pb = drive_step(x, s, torch.from_numpy(u[k]), p, PTH, Flat(mu=0.8), hdt, books=True)
        if (k + 1) % 100 == 0:
            out.append({"k": k + 1, "x": x[0].tolist(), "s": s[0].tolist(), "fuel": float(pb.fuel[0])})
    return out


def test_both_engines_reproduce_the_golden_drive():
    if not GOLDEN.exists():  # pragma: no cover - written once, by hand: python tests/test_powertrain_engine.py
        pytest.fail(f"{GOLDEN} is missing; write it with `python {__file__}`")
    golden = json.loads(GOLDEN.read_text())["trace"]
    ref = _torch_golden_trace()
    for g, r in zip(golden, ref):
        np.testing.assert_allclose(r["x"], g["x"], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(r["s"], g["s"], rtol=1e-9, atol=1e-9)
    p, u, hdt = _golden_run()
    xn = dyn4_rest(p, Flat(mu=0.8), (1,)).numpy()
    sn = powertrain_rest(PTH, (1,)).numpy()
    packed, packed_pt, ter = numba_plant.pack_params(p), pack_powertrain(PTH), numba_plant.pack_terrain(Flat(mu=0.8), 1)
    by_k = {g["k"]: g for g in golden}
    for k in range(u.shape[0]):
        xn, sn = drive_step_np(xn, sn, u[k], packed, packed_pt, ter, hdt)
        if (k + 1) in by_k:
            np.testing.assert_allclose(xn[0], by_k[k + 1]["x"], rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(sn[0], by_k[k + 1]["s"], rtol=1e-9, atol=1e-9)
    # the drive did what it says: forward past 40 km/h, stopped, then backed up
    vs = [g["x"][3] for g in golden]
    assert max(vs) * 3.6 > 40 and min(vs) < -1.0 and golden[-1]["s"][1] == -1
    assert math.isfinite(golden[-1]["fuel"])


if __name__ == "__main__":  # write the golden file (once; review the diff before committing)
    GOLDEN.write_text(json.dumps({"about": "drive_step from rest on Flat(mu=0.8), float64, hdt 0.01: full "
                                  "throttle 6 s with a lane change, full brake 4 s, then reverse at 0.6 throttle; "
                                  "states every 100 substeps (tests/test_powertrain_engine.py)",
                                  "trace": _torch_golden_trace()}, indent=1))
