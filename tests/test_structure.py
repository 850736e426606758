"""The code's structure: no import cycles, the terrain registry (grounds added from outside the
package), names instead of numbers for observation entries, scripts whose flags are the config."""

import dataclasses
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import dyn4_gym  # noqa: F401  (registers the ids)
from dyn4_gym import _tree
from dyn4_gym.agents import PurePursuit, SHACConfig
from dyn4_gym.agents.evaluation import evaluate
from dyn4_gym.envs import ConfigError, Dyn4DiffEnv, Dyn4VectorEnv, EnvConfig, TaskCore
from dyn4_gym.envs.core import OBS_INDEX
from dyn4_gym.ground import TERRAIN_KINDS, Ground, TerrainKind, register_terrain

ROOT = Path(__file__).resolve().parents[1]


def test_the_code_passes_the_linter():
    """ruff with pyflakes' rules (pyproject.toml, [tool.ruff]) over the package, the tests and the
    scripts: no unused imports or variables, no undefined or redefined names."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_module_imports_on_its_own():
    """Each module imported first, in a fresh module table: an import cycle fails here."""
    code = r"""
import importlib, pkgutil, sys
import dyn4_gym
names = sorted(m.name for m in pkgutil.walk_packages(dyn4_gym.__path__, "dyn4_gym."))
for name in names:
    for k in [k for k in sys.modules if k == "dyn4_gym" or k.startswith("dyn4_gym.")]:
        del sys.modules[k]
    importlib.import_module(name)
print(len(names))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) > 20


# ------------------------------------------------------------------ a terrain kind from outside
@dataclass(frozen=True)
class TiltConfig:
    """A test kind: a plane tilted by a per-row drawn slope along +X, and one friction value."""

    kind: str = "test_tilt"
    max_slope: float = 0.05
    mu: float = 0.6

    def validate(self, path):
        if not (isinstance(self.max_slope, float) and 0 <= self.max_slope < 0.5):
            raise ConfigError(f"{path}.max_slope must be in [0, 0.5), got {self.max_slope!r}")


@dataclass(frozen=True)
class Tilt(Ground):
    slope: torch.Tensor  # (B,)
    mu: float = 0.6

    def height(self, xy):
        return self.slope.reshape(-1, *([1] * (xy.ndim - 2))) * xy[..., 0]

    def friction(self, xy):
        return torch.full_like(xy[..., 0], self.mu)


def _draw_tilt(cfg, ctx):
    return Tilt(slope=cfg.max_slope * (2 * ctx.u[:, 0] - 1), mu=cfg.mu)


@pytest.fixture(scope="module")
def tilt_kind():
    kind = register_terrain(TerrainKind("test_tilt", TiltConfig, _draw_tilt, lambda cfg: 1), overwrite=True)
    yield kind
    TERRAIN_KINDS.pop("test_tilt", None)


def test_a_registered_ground_drives_the_env(tilt_kind):
    with pytest.warns(RuntimeWarning, match="torch engine"):  # a kind without a Numba kernel
        env = gym.make("Dyn4Humvee-v1", ground={"kind": "test_tilt", "max_slope": 0.04, "mu": 0.55})
    assert env.unwrapped.engine == "torch"
    obs, _ = env.reset(seed=3)
    for w in ("FL", "FR", "RL", "RR"):
        assert obs[OBS_INDEX[f"mu_{w}"]] == pytest.approx(0.55, abs=1e-6)
    slope = float(env.unwrapped.state.terrain.slope[0])
    assert 0 < abs(slope) <= 0.04
    for _ in range(20):
        obs, r, term, trunc, info = env.step(np.array([0.0, 0.2], dtype=np.float32))
        assert np.isfinite(r)
    # the body rides the plane: heave follows slope * X
    x = env.unwrapped.state.x[0]
    assert float(x[6]) == pytest.approx(slope * float(x[0]), abs=0.02)
    with pytest.raises(ConfigError, match="ground.max_slope"):
        gym.make("Dyn4Humvee-v1", ground={"kind": "test_tilt", "max_slope": 0.9})


def test_a_registered_ground_survives_partial_resets_and_gradients(tilt_kind):
    venv = Dyn4VectorEnv(num_envs=3, ground={"kind": "test_tilt"})
    venv.reset(seed=0)
    before = venv.runner.state.terrain.slope.clone()
    venv.reset(options={"reset_mask": np.array([False, True, False])})
    after = venv.runner.state.terrain.slope
    assert float(after[0]) == float(before[0]) and float(after[2]) == float(before[2])
    assert float(after[1]) != float(before[1])  # row 1 drew its next episode
    denv = Dyn4DiffEnv(num_envs=2, ground={"kind": "test_tilt"}, dtype="float64")
    denv.reset(seed=1)
    a = torch.zeros(2, 2, dtype=torch.float64, requires_grad=True)
    _, r, *_ = denv.step(a)
    (g,) = torch.autograd.grad(r.sum(), a)
    assert bool(torch.isfinite(g).all()) and float(g.abs().sum()) > 0


def test_unknown_ground_kind_is_refused():
    with pytest.raises(ConfigError, match="ground.kind"):
        EnvConfig.from_dict({"ground": {"kind": "lava"}})


def test_grid_kind_from_user_arrays():
    nx, ny = 60, 40
    heights = np.zeros((nx, ny))
    heights[:, :] = 0.02 * np.arange(nx)[:, None]  # 2 % along +X from the origin
    mu = np.full((nx, ny), 0.45)
    env = gym.make("Dyn4HumveeFlat-v1", ground={"kind": "grid", "heights": heights.tolist(), "mu": mu.tolist(),
                                                "origin": (-10.0, -20.0), "spacing": 1.0})
    obs, _ = env.reset(seed=0)
    assert obs[OBS_INDEX["mu_FL"]] == pytest.approx(0.45, abs=1e-6)
    x = env.unwrapped.state.x[0]
    assert float(x[6]) == pytest.approx(0.02 * 10.0, abs=0.01)  # the rest state sits on the grid at X = 0
    with pytest.raises(ConfigError, match="ground.heights"):
        gym.make("Dyn4Humvee-v1", ground={"kind": "grid", "heights": [[1.0, float("nan")], [0.0, 0.0]]})


# ------------------------------------------------------------------ names, not numbers
def test_pure_pursuit_follows_a_changed_preview():
    """The controller reads the preview by name and takes its distances from the config."""
    preview = (4.0, 8.0, 16.0, 24.0, 32.0)
    kw = dict(course={"length": 120.0, "preview": preview}, episode_steps=300)
    res = evaluate(PurePursuit(preview=preview), kw, seeds=(10_000, 10_001))
    assert res.finished == 1.0


def test_tree_map_handles_shared_fields():
    @dataclass(frozen=True)
    class S:
        SHARED = ("table",)
        a: torch.Tensor
        table: torch.Tensor
        label: str = "x"

    s = S(a=torch.arange(4.0), table=torch.ones(7))
    t = _tree.take_rows(s, torch.tensor([1, 3]))
    assert torch.equal(t.a, torch.tensor([1.0, 3.0])) and t.table.shape == (7,) and t.label == "x"
    leaves = _tree.tree_leaves(s)
    assert len(leaves) == 1
    assert torch.equal(_tree.tree_unflatten(s, [torch.zeros(4)]).a, torch.zeros(4))


# ------------------------------------------------------------------ scripts
def test_train_diff_help_lists_every_config_field():
    r = subprocess.run([sys.executable, str(ROOT / "agents" / "train_diff.py"), "--help"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    for f in dataclasses.fields(SHACConfig):
        assert "--" + f.name.replace("_", "-") in r.stdout, f.name


@pytest.mark.parametrize("script", ["train_diff.py", "train_sb3.py", "evaluate.py"])
def test_scripts_have_a_main(script):
    src = (ROOT / "agents" / script).read_text()
    assert "def main(argv=None)" in src and 'if __name__ == "__main__":' in src


def test_shac_lives_on_the_envs_device():
    from dyn4_gym.agents import SHAC

    agent = SHAC(SHACConfig(num_envs=2, horizon=2), dict(course={"length": 60.0}, episode_steps=20))
    dev = TaskCore(EnvConfig()).device
    assert agent.device == dev
    assert all(p.device == dev for p in agent.actor.parameters())
    assert math.isfinite(agent.iteration()["actor_loss"])


# the house's layers, lowest first: a module may import its own layer and those below it. The
# scripts' helpers (cli) sit above the env side, whose ids they check, and below the trainers and
# the fit that use them; the top-level modules (demo, doc_tables, __main__) above everything.
_LAYERS = {"model": 0, "__init__": 0, "_math": 1, "_checks": 1, "_notice": 1, "_rng": 1, "_tree": 1, "_extras": 1, "ground": 2,
           "plant": 3, "engine": 4, "threads": 4, "envs": 5, "cli": 6, "agents": 7, "fit": 7, "provenance": 7,
           "demo": 8, "doc_tables": 8, "__main__": 8}


def _dyn4_imports(path: Path) -> set:
    """The dyn4_gym modules ``path`` imports (absolute or relative), by their first package name."""
    import ast

    pkg = path.relative_to(ROOT / "dyn4_gym").parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(pkg[:-1])[: len(pkg) - node.level]
            target = base + (node.module.split(".") if node.module else [])
            if not target:  # "from .. import x": a module of the package, or a name its __init__ defines
                top = ROOT / "dyn4_gym"
                out.update(a.name if (top / a.name).is_dir() or (top / f"{a.name}.py").exists() else "__init__"
                           for a in node.names)
            else:
                out.add(target[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dyn4_gym."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("dyn4_gym."))
    return out


@pytest.mark.parametrize("layer", sorted(_LAYERS))
def test_no_import_runs_upward(layer):
    """The model layer imports nothing of the package; the kernels (engine/) import only the
    model, the plant and the ground, never the env side (issue 21); the env side nothing of the
    scripts' helpers (cli), the trainers or the fit, so no import circle runs through them (issue
    49). Every module of the package has its layer."""
    base = ROOT / "dyn4_gym" / layer
    paths = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    assert all(p.exists() for p in paths)
    for path in paths:
        for target in _dyn4_imports(path):
            assert target in _LAYERS and _LAYERS[target] <= _LAYERS[layer], \
                f"{path.relative_to(ROOT)} imports dyn4_gym.{target}, above its layer {layer!r}"


def test_every_module_of_the_package_has_its_layer():
    tops = {p.name.removesuffix(".py") for p in (ROOT / "dyn4_gym").iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())}
    assert tops <= set(_LAYERS), sorted(tops - set(_LAYERS))


def test_the_scripts_helpers_import_no_trainer():
    """cli.py (every script's flags and error handling) imports nothing of dyn4_gym.agents: the
    trainers import cli, so the other way round was an import circle (issue 49);
    ``CheckpointError`` lives in ``_checks`` beside ``ConfigError``."""
    from dyn4_gym import _checks
    from dyn4_gym.agents import CheckpointError

    assert "agents" not in _dyn4_imports(ROOT / "dyn4_gym" / "cli.py")
    assert CheckpointError is _checks.CheckpointError


def test_the_plant_kernels_import_nothing_of_the_powertrains():
    """numba_powertrain builds on numba_plant, never the other way (the chain that binds a ground
    sampler, with_sampler, lives with the powertrain's substep it ends in; issue 49)."""
    import ast

    tree = ast.parse((ROOT / "dyn4_gym" / "engine" / "numba_plant.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m and "numba_powertrain" in m}


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_gym_make_builds_the_task_once(engine, monkeypatch):
    """Issue 49: gym.make builds one task core; the registered limit's hand-over (TimeLimit
    truncates, the env's own limit lifted) changes the built one in place, and TimeLimit's limit
    still ends the episode (here 900 steps, past the config's default 800)."""
    import gymnasium as gym
    import numpy as np

    from dyn4_gym.envs import core as core_module
    from dyn4_gym.envs.env import UNLIMITED

    builds = []
    init = core_module.TaskCore.__init__

    def counted(self, *args, **kwargs):
        builds.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(core_module.TaskCore, "__init__", counted)
    env = gym.make("Dyn4HumveeFlat-v1", engine=engine, max_episode_steps=900, start_speed=0.0, target_speed=0.5)
    assert len(builds) == 1
    assert env.unwrapped.config.episode_steps == env.unwrapped.core.cfg.episode_steps == UNLIMITED
    env.reset(seed=0)
    for t in range(1, 1001):
        _, _, te, tr, _ = env.step(np.array([0.0, -1.0], np.float32))  # braking at a standstill: never ends itself
        if te or tr:
            break
    assert (t, te, tr) == (900, False, True)
    with pytest.raises(RuntimeError, match="has a state already"):
        env.unwrapped._runner.set_episode_steps(5)


def test_no_literal_state_length_in_the_package():
    """Issue 49: the plant state's length is N_DYN4 (model.state), never a literal 14 in code
    (strings and comments aside), so a state that grows is refused or carried, never cut
    silently. Three 14s are other things: a scratch row's index, a substep data entry's and a
    packed powertrain's entry."""
    import tokenize

    other = {("numba_plant.py", "G2 = 14"), ("numba_plant.py", "GR2 = 14"), ("packed.py", "OVERRUN = 14")}
    found = []
    for path in sorted((ROOT / "dyn4_gym").rglob("*.py")):
        with open(path, "rb") as fh:
            for tok in tokenize.tokenize(fh.readline):
                if tok.type == tokenize.NUMBER and tok.string == "14" and not any(
                        path.name == f and s in tok.line for f, s in other):
                    found.append(f"{path.relative_to(ROOT)}:{tok.start[0]}: {tok.line.strip()}")
    assert not found, "\n".join(found)


def test_the_torch_side_reads_the_plant_state_by_name():
    """Issue 49: outside the kernels (engine/, which read it through their own named constants)
    and the schema (model/), a plant state (``x``, ``x1``) is never subscripted by a literal
    position: ``x[..., DYN4.VX]``, ``x[..., VERTICAL]``, so a state that grows keeps every reader right."""
    import re

    literal = re.compile(r"\bx1?\[(?:\.\.\.|:), *:?-?\d")
    found = []
    for path in sorted((ROOT / "dyn4_gym").rglob("*.py")):
        if path.parent.name in ("engine", "model"):
            continue
        for k, line in enumerate(path.read_text().splitlines(), 1):
            if literal.search(line.split("#")[0]):
                found.append(f"{path.relative_to(ROOT)}:{k}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_kernels_read_the_terrain_tuple_by_name():
    """Issue 49: the rough ground's fields reach the kernels as one tuple in TERRAIN_FIELDS'
    order; each kernel reads a field at its named position (model.packed.TK_*), never by
    unpacking the whole tuple in an order written out again."""
    import re

    from dyn4_gym.model import packed

    assert [getattr(packed, "TK_" + n.upper()) for n in packed.TERRAIN_FIELDS] == list(range(len(packed.TERRAIN_FIELDS)))
    assert packed.TK_EDGE == len(packed.TERRAIN_FIELDS)
    unpack = re.compile(r"^\s*(\w+\s*,\s*){4,}\w+\s*=\s*T\s*$")
    for path in sorted((ROOT / "dyn4_gym" / "engine").glob("*.py")):
        for k, line in enumerate(path.read_text().splitlines(), 1):
            assert not (unpack.match(line) and "base_mu" in line), f"{path.name}:{k}: {line.strip()}"


def test_the_reward_recipe_names_where_each_built_in_term_lives():
    """Issue 49: docs/engines.md's recipe for a built-in term is current: each built-in term
    has its torch function in rewards._FUNCTIONS and its kernel line in numba_task.terms_row,
    which both Numba callers use; the example term's torch function runs on a real context."""
    import inspect

    import torch

    from dyn4_gym.engine import numba_stages, numba_task
    from dyn4_gym.envs import rewards
    from dyn4_gym.model.state import DYN4, N_DYN4
    from dyn4_gym.model.task import TERM_ORDER

    recipe = (ROOT / "docs" / "engines.md").read_text()
    assert "`terms_row`" in recipe and "`_FUNCTIONS`" in recipe and "StepContext.var" in recipe
    body = inspect.getsource(numba_task.terms_row.py_func)
    for name in TERM_ORDER:
        assert rewards._FUNCTIONS[name].__name__ == name
        assert f"terms[TERM.{name.upper()}]" in body, name
    for caller in (numba_task._step_py, numba_stages.terms.py_func):
        assert "terms_row(" in inspect.getsource(caller)
    # the figures the terms read are declared once (model.task.STEP_FIGURES), each read by name
    # and each written by the step kernel by name
    from dyn4_gym.model.task import STEP_FIGURES

    assert "`STEP_FIGURES`" in recipe
    step_body = inspect.getsource(numba_task._step_py)
    for name in STEP_FIGURES:
        assert f"fig[FIG.{name.upper()}]" in body and f"fig[FIG.{name.upper()}]" in step_body, name
    ctx = rewards.StepContext(progress=torch.zeros(2), speed=torch.tensor([10.0, 5.0]), target_speed=torch.ones(2),
                              cross_track=torch.zeros(2), half_width=3.0, heading_error=torch.zeros(2), books={},
                              weight=torch.ones(2), action=torch.zeros(2, 2), prev_action=torch.zeros(2, 2),
                              roll_rate=torch.zeros(2), pitch_rate=torch.zeros(2), failed=torch.zeros(2, dtype=bool),
                              success=torch.zeros(2, dtype=bool),
                              state=torch.zeros(2, N_DYN4).index_fill(1, torch.tensor([DYN4.R]), 0.2))
    assert torch.allclose(-(ctx.var("r") * ctx.speed) ** 2, torch.tensor([-4.0, -1.0]))  # the recipe's lateral term
