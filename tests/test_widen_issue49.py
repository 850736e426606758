"""Issue 49: the plant state grows safely. A copy of the package whose ``model.state.DYN4`` has
five entries appended runs in a subprocess, on both engines with the powertrain, 120 steps with
resets. Four are per-wheel entries with a stage written for them on both engines, the recipe of
docs/engines.md ("One stage signature"): the schema entries, a kernel stage ``wheels_row(m, x, y,
W, D)`` called by the substep and declared in ``STAGE_WRITES``, and the same entries in the torch
step's ``with_entries``; the rule is trivial (each wheel's entry grows by ``hdt * vx`` a substep).
The fifth, ``TAG``, has no stage at all (the schema change alone).

- the seeds' entries, the rewards and the observations equal a run of today's package bit for bit
  (the new entries change nothing they do not own);
- ``TAG``, set by hand after the reset, is carried through every substep unchanged (every stage
  writes its own entries only: torch's ``plant.state.with_entries``, the kernel's ``substep_row``
  carrying ``x`` over) until the row resets, where the rest state puts it at 0 (``dyn4_rest`` /
  ``rest_row`` write every entry they are given), equal on both engines;
- the wheel entries follow their rule on both engines, equal to 1e-12, from the values set by hand
  and from 0 after each reset.

Before issue 49 the torch step refused the wider state (a positional ``torch.cat``) and the Numba
substep left the new entries as uninitialised memory.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dyn4_gym
from dyn4_gym.model.state import DYN4, N_DYN4

WHEELS = ("W_FL", "W_FR", "W_RL", "W_RR")  # four per-wheel entries (the corners issue's wheel speeds), with a stage
EXTRA = WHEELS + ("TAG",)  # and one with none
STEPS, ROWS = 120, 4
RUN = dict(num_envs=ROWS, dtype="float64", episode_steps=40)
# the driver's action: its substep (the powertrain's) runs the plain one inside, so it covers both
# (a second action kind would double the copy's kernel builds, the cost of this test)
ACTIONS = {"driver": ((0.0, 0.55, 0.05), (0.6, 0.4, 0.2))}

# the run, the same in both processes: the extras (if any) set after the reset, every step recorded
SCRIPT = r'''
import json, sys
import numpy as np, torch
from dyn4_gym.envs import Dyn4VectorEnv
from dyn4_gym.model.state import N_DYN4


def run(engine, action, n_core, run, loc, scale, steps, out):
    env = Dyn4VectorEnv(engine=engine, action=action, **run)
    rows = run["num_envs"]
    env.reset(seed=11)
    x = env.runner.state.x
    extra = np.random.default_rng(5).normal(0.0, 3.0, (rows, N_DYN4 - n_core))
    if N_DYN4 > n_core:  # set the new entries by hand: nothing writes them but a reset
        x[:, n_core:] = torch.as_tensor(extra) if torch.is_tensor(x) else extra
    rng = np.random.default_rng(0)
    rec = {"reward": [], "obs": [], "done": [], "core": [], "extra": []}
    for _ in range(steps):
        a = np.clip(rng.normal(loc, scale, (rows, len(loc))), -1.5, 1.5).astype(np.float32)
        obs, r, te, tr, _ = env.step(a)
        x = env.runner.state.x
        x = x.numpy() if torch.is_tensor(x) else np.asarray(x)
        rec["reward"].append(r.tolist())
        rec["obs"].append(obs.astype(np.float64).tolist())
        rec["done"].append((te | tr).tolist())
        rec["core"].append(x[:, :n_core].tolist())
        rec["extra"].append(x[:, n_core:].tolist())
    rec["set"] = extra.tolist()
    out[f"{engine}/{action}"] = rec


if __name__ == "__main__":
    cfg = json.loads(sys.argv[1])
    out = {}
    for engine in ("torch", "numba"):
        for action, (loc, scale) in cfg["actions"].items():
            run(engine, action, cfg["n_core"], cfg["run"], loc, scale, cfg["steps"], out)
    with open(cfg["out"], "w") as fh:
        json.dump(out, fh)
'''


# the wheel entries' stage on both engines: a kernel stage with the one signature, and torch's entries
KERNEL_STAGE = '''

@njit(cache=True, error_model="numpy", inline="always")
def wheels_row(m, x, y, W, D):
    """The fixture's per-wheel entries: each grows by hdt * vx."""
    for i in range(4):
        y[S.W_FL + i] = x[S.W_FL + i] + m.hdt * x[S.VX]
'''
TORCH_ENTRIES = "**{DYN4.W_FL + i: x[..., DYN4.W_FL + i] + hdt * x[..., DYN4.VX] for i in range(4)}"


def _patch(path: Path, anchor: str, new: str) -> None:
    src = path.read_text()
    assert src.count(anchor) == 1, f"{path.name} no longer reads as this test expects: {anchor!r}"
    path.write_text(src.replace(anchor, new))


def _widened(root: Path) -> Path:
    """A copy of the installed package under ``root`` with ``EXTRA`` appended to ``DYN4`` and the
    wheel entries' stage written on both engines."""
    shutil.copytree(Path(dyn4_gym.__file__).parent, root / "dyn4_gym", ignore=shutil.ignore_patterns("__pycache__"))
    pkg = root / "dyn4_gym"
    last = max(DYN4)
    anchor = f"    {last.name} = {int(last)}\n"  # DYN4's last member
    _patch(pkg / "model" / "state.py", anchor,
           anchor + "".join(f"    {n} = {N_DYN4 + i}\n" for i, n in enumerate(EXTRA)))
    plant = pkg / "engine" / "numba_plant.py"
    _patch(plant, "    if m.books:\n        books_row(m, x, y, W, D, bk, dwork)",
           "    wheels_row(m, x, y, W, D)\n    if m.books:\n        books_row(m, x, y, W, D, bk, dwork)")
    _patch(plant, "STAGE_WRITES = {\n", f"STAGE_WRITES = {{\n    \"wheels\": {{\"y\": {WHEELS!r}}},\n")
    plant.write_text(plant.read_text() + KERNEL_STAGE)
    _patch(pkg / "plant" / "dyn4.py", "DYN4.DELTA: f.delta, DYN4.A: f.a})",
           f"DYN4.DELTA: f.delta, DYN4.A: f.a, {TORCH_ENTRIES}}})")
    return root


def _run_copy(tmp: Path, pythonpath: Path) -> dict:
    """SCRIPT's runs in a subprocess that imports the package under ``pythonpath``."""
    out = tmp / "wide.json"
    cfg = dict(actions=ACTIONS, n_core=N_DYN4, run=RUN, steps=STEPS, out=str(out))
    env = dict(os.environ)
    # the copy first; its own Numba cache (its sources are other files)
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    env["NUMBA_CACHE_DIR"] = str(tmp / "numba_cache")
    script = tmp / "widen_run.py"
    script.write_text(SCRIPT)
    res = subprocess.run([sys.executable, str(script), json.dumps(cfg)], env=env, cwd=tmp, capture_output=True,
                         text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_a_wider_plant_state_is_carried_by_both_engines(tmp_path):
    wide = _run_copy(tmp_path, _widened(tmp_path / "pkg"))
    ns: dict = {}
    exec(compile(SCRIPT, "widen_run", "exec"), ns)  # today's package, in this process
    narrow: dict = {}
    for engine in ("torch", "numba"):
        for action, (loc, scale) in ACTIONS.items():
            ns["run"](engine, action, N_DYN4, RUN, loc, scale, STEPS, narrow)
    for key, w in wide.items():
        n = narrow[key]
        # nothing the new entries do not own moved
        for field in ("reward", "obs", "done", "core"):
            assert np.array_equal(np.asarray(w[field]), np.asarray(n[field])), (key, field)
        extra, done = np.asarray(w["extra"]), np.asarray(w["done"])
        assert extra.shape == (STEPS, ROWS, len(EXTRA)), key
        assert np.asarray(n["extra"]).shape == (STEPS, ROWS, 0)
        # TAG: carried unchanged until the row's first episode ends; 0 from its reset on
        tag = len(WHEELS)
        first_end = done.argmax(0)
        assert done.any(0).all(), key  # every row reset at least once
        for b in range(ROWS):
            kept = extra[:first_end[b] + 1, b, tag]
            assert np.array_equal(kept, np.full(kept.shape, w["set"][b][tag])), (key, b)
            assert np.all(extra[first_end[b] + 1:, b, tag] == 0.0), (key, b)
        assert first_end.min() >= 10  # carried through many substeps
        # the wheel entries follow their rule: every wheel of a row grows by the same sum of hdt * vx,
        # from the values set by hand, then from 0 after each reset
        wheels = extra[:, :, :tag]
        start = np.where(np.vstack([np.zeros((1, ROWS), bool), done[:-1]])[..., None], 0.0,
                         np.vstack([np.asarray(w["set"])[None, :, :tag], wheels[:-1]]))
        grown = wheels - start
        assert np.abs(grown).max() > 0.1, key  # the rule ran (the car drives: ~0.5 m a step)
        np.testing.assert_allclose(grown, np.broadcast_to(grown[..., :1], grown.shape), rtol=0, atol=1e-9,
                                   err_msg=key)
    for action in ACTIONS:
        t, n = np.asarray(wide[f"torch/{action}"]["extra"]), np.asarray(wide[f"numba/{action}"]["extra"])
        assert np.array_equal(t[..., len(WHEELS)], n[..., len(WHEELS)])
        np.testing.assert_allclose(n, t, rtol=1e-12, atol=1e-12, err_msg="the wheel entries' stage on both engines")


def test_the_plant_reads_its_state_length_by_name():
    """No literal plant-state length in the plant, the engines, the env or the ground: a state
    grown by a schema entry needs no other edit (issue 49). Integer literals equal to a state's
    length are allowed only where a name is defined (``G2 = 14``, an enum member)."""
    import re
    import tokenize

    from dyn4_gym.model.state import BIKE

    lengths = {str(N_DYN4), str(len(BIKE))}
    definition = re.compile(r"^[A-Za-z_]\w* = \d+(\s+#.*)?$")
    pkg = Path(dyn4_gym.__file__).parent
    found = []
    for sub in ("plant", "engine", "envs", "model", "ground"):
        for path in sorted((pkg / sub).glob("*.py")):
            with path.open() as fh:
                for tok in tokenize.generate_tokens(fh.readline):
                    line = tok.line.strip()
                    if tok.type == tokenize.NUMBER and tok.string in lengths and not definition.match(line):
                        found.append(f"{path.relative_to(pkg)}:{tok.start[0]}: {line}")
    assert not found, "literal state lengths:\n" + "\n".join(found)
