"""Issue 45, item 6: the bump gate's parts (docs/plant.md, "Bumps at speed"): its reference, its
phases and its script. The gate's figures for the 14-state plant are in docs/plant.md; what is
held here is that the yardstick is sound and that the script measures what the rule says."""

import json

import numpy as np
import pytest
import torch

from dyn4_gym.plant import HUMVEE, dyn4_params
from dyn4_gym.plant.manoeuvres import bump, bump_peaks
from dyn4_gym.plant.quarter_car import UNSPRUNG, quarter_car_peak, tire_stiffness


@pytest.fixture(scope="module")
def p64():
    return dyn4_params(HUMVEE, dtype=torch.float64)


def _ref(p, v, height, radius, dt=1e-4):
    return quarter_car_peak(v, float(p.Fz0[0]), float(p.k[0]), float(p.damp[0]), UNSPRUNG, tire_stiffness(),
                            height=height, radius=radius, dt=dt)


def test_the_reference_has_converged_in_its_step_and_follows_the_bump(p64):
    """RK4 at 0.1 ms against 0.05 ms on the gate's sharpest cell (0.5 m, 0.10 m, 30 m/s): the
    peak moves less than 0.5 %. A taller bump loads more, a longer one at the same speed less,
    and no peak passes the tire's full compression ``1 + kt H / Fz0``."""
    fine, coarse = _ref(p64, 30.0, 0.10, 0.25, dt=5e-5), _ref(p64, 30.0, 0.10, 0.25)
    assert abs(coarse / fine - 1) < 5e-3
    assert _ref(p64, 20.0, 0.10, 0.25) > _ref(p64, 20.0, 0.05, 0.25) > _ref(p64, 20.0, 0.05, 0.5) > 1.0
    full = 1 + tire_stiffness() * 0.10 / float(p64.Fz0[0])
    assert coarse < full


def test_the_first_phase_is_the_bump_manoeuvre_and_phases_move_the_samples(p64):
    """``bump_peaks``'s phase 0 is :func:`bump`'s front-left peak; the other phases start the car
    a fraction of a substep back. Where the bump is longer than many substeps (1 m at 5 m/s: 20
    of them) the phases agree within 1 %; a 0.5 m bump at 30 m/s lasts 1.7 substeps, and the
    14-state plant's peak then depends on where its samples fall (the aliasing the gate's second
    figure measures): one phase nearly misses the bump, another loads the wheel 5x more."""
    slow = bump_peaks(p64, height=0.1, radius=0.5, v=5.0, phases=(0.0, 0.25, 0.5, 0.75))
    assert slow[0] == pytest.approx(float(bump(p64, height=0.1, v=5.0)["peak_ratio"][0]), rel=1e-12)
    assert (slow.max() - slow.min()) / slow.mean() < 0.01
    fast = bump_peaks(p64, height=0.1, radius=0.25, v=30.0, phases=(0.0, 0.5))
    assert fast[0] < 1.3 and fast[1] > 5 * fast[0]


def test_the_script_measures_the_rule_and_writes_it(tmp_path, capsys, load_script):
    """benchmarks/bump_gate.py at one speed: every shape's row, the two figures, the JSON."""
    script = load_script("benchmarks/bump_gate.py")
    out = tmp_path / "gate.json"
    assert script.main(["--speeds", "30", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert len(data["rows"]) == len(script.LENGTHS) * len(script.HEIGHTS) == text.count("| 30 m/s |")
    for r in data["rows"]:
        assert len(r["peaks"]) == len(script.PHASES)
        assert r["mean"] == pytest.approx(np.mean(r["peaks"])) and r["reference"] > 1.0
        assert r["difference"] == pytest.approx(r["mean"] / r["reference"] - 1)
    v = data["verdict"]
    assert v["worst_peak"] == pytest.approx(max(abs(r["difference"]) for r in data["rows"]))
    assert v["worst_spread"] == pytest.approx(max(r["spread"] for r in data["rows"]))
    assert v["spread_met"] is (v["worst_spread"] <= script.SPREAD_TOL)
    assert ("met" if v["peak_met"] else "missed") in text
