"""Issue 49: the plant state grows safely. A copy of the package whose ``model.state.DYN4`` has
four per-wheel entries appended (the schema change alone: no stage of either engine written for
them) runs in a subprocess, on both engines with the powertrain, 120 steps with resets:

- the seeds' entries, the rewards and the observations equal a run of today's package bit for bit
  (the new entries change nothing they do not own);
- the new entries, set by hand after the reset, are carried through every substep unchanged
  (every stage writes its own entries only: torch's ``plant.state.with_entries``, the kernel's
  ``substep_row`` carrying ``x`` over) until the row resets, where the rest state puts them at 0
  (``dyn4_rest`` / ``rest_row`` write every entry they are given), equal on both engines.

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

EXTRA = ("W_FL", "W_FR", "W_RL", "W_RR")  # four per-wheel entries (the corners issue's wheel speeds)
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


def _widened(root: Path) -> Path:
    """A copy of the installed package under ``root`` with ``EXTRA`` appended to ``DYN4``."""
    shutil.copytree(Path(dyn4_gym.__file__).parent, root / "dyn4_gym", ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "dyn4_gym" / "model" / "state.py"
    src = path.read_text()
    last = max(DYN4)
    anchor = f"    {last.name} = {int(last)}\n"  # DYN4's last member
    assert src.count(anchor) == 1, "model/state.py's DYN4 no longer ends as this test expects"
    path.write_text(src.replace(anchor, anchor + "".join(f"    {n} = {N_DYN4 + i}\n" for i, n in enumerate(EXTRA))))
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
        # carried unchanged until the row's first episode ends; 0 from its reset on
        first_end = done.argmax(0)
        assert done.any(0).all(), key  # every row reset at least once
        for b in range(ROWS):
            kept = extra[:first_end[b] + 1, b]
            assert np.array_equal(kept, np.broadcast_to(w["set"][b], kept.shape)), (key, b)
            assert np.all(extra[first_end[b] + 1:, b] == 0.0), (key, b)
        assert first_end.min() >= 10  # carried through many substeps
    for action in ACTIONS:
        assert np.array_equal(wide[f"torch/{action}"]["extra"], wide[f"numba/{action}"]["extra"])


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
