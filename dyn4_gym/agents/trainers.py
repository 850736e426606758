"""The trainers: each is a module (its algorithm) plus its entry in :data:`TRAINERS`, the one
place their names are written (issue 49). The scripts (``agents/tune.py``'s ``--trainer``,
``agents/train_sb3.py``'s ``--algo``), the shipped agents (:mod:`dyn4_gym.agents.pretrained`),
the results tables and the learning benchmark list, pick and build trainers through it.

A trainer's entry says what kind it is (``"plant"``: gradients through the differentiable plant,
:mod:`dyn4_gym.agents.shac`; ``"sb3"``: a Stable-Baselines3 algorithm on the batched env,
:mod:`dyn4_gym.agents.sb3_glue`), its checkpoint's file extension, the sweep ``tune.py`` runs
without ``--space`` and its training chunk, and builds a :class:`Run`: one training run driven in
env steps, whose deterministic policy evaluates on torch observations and whose files reload
with :meth:`Trainer.load_policy`. Adding a trainer: its module and an entry here (a kind of its
own needs its branch in :meth:`Trainer.make_run` and :meth:`Trainer.load_policy`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["Trainer", "Run", "TRAINERS", "DEFAULT_TRAINER", "VECNORMALIZE", "VECNORMALIZE_FILE", "trainer",
           "sb3_trainers"]


@runtime_checkable
class Run(Protocol):
    """One training run (:meth:`Trainer.make_run`)."""

    @property
    def env_steps(self) -> int:
        """Env steps trained so far."""

    def train_to(self, steps: int) -> list[dict]:
        """Train until at least ``steps`` env steps (nothing where it is there already); the
        trainer's per-iteration records on the way (SB3's: none)."""

    def train_chunk(self, n: int) -> list[dict]:
        """Train ``n`` more of the trainer's own units (:attr:`Trainer.tune_chunk`'s: iterations for
        a ``"plant"`` trainer, env steps for an ``"sb3"`` one); the records, as :meth:`train_to`."""

    def policy(self):
        """``policy(obs (B, n_obs) tensor) -> actions``: the deterministic policy as it is now."""

    def save(self, stem: str) -> list[str]:
        """Write the run's files as ``stem`` + the trainer's extension (and any file beside it
        the policy needs); returns their paths."""


@dataclass(frozen=True, eq=False)
class Trainer:
    name: str  # the registry key: flags, CSV rows, file names
    label: str  # how tables and plots name it
    kind: str  # "plant" (through the differentiable plant) or "sb3"
    suffix: str  # the checkpoint's file extension
    sb3_class: str = ""  # kind "sb3": the class in stable_baselines3
    tune_space: dict = field(default_factory=dict)  # agents/tune.py's sweep without --space
    tune_chunk: int = 1  # agents/tune.py's training between reports: iterations ("plant") or env steps ("sb3")

    def make_run(self, env_kwargs: dict, seed: int, settings=None, compile: bool | None = None) -> Run:
        """A fresh run on the env ``env_kwargs``: for a ``"plant"`` trainer ``settings`` is its
        config (``SHACConfig``; None: the defaults) and ``compile`` its compiled step (None: the
        config's own ``compile``, so a config that says False is not compiled behind it); for an
        ``"sb3"`` one, the RL Zoo hyperparameters (:func:`dyn4_gym.agents.sb3_glue.load_zoo_config`)."""
        if self.kind == "plant":
            return _PlantRun(env_kwargs, seed, settings, compile)
        if settings is None:
            raise ValueError(f"{self.name}: an SB3 trainer's run needs its hyperparameters (an RL Zoo section)")
        return _SB3Run(self.name, settings, env_kwargs, seed)

    def load_policy(self, stem: str):
        """The deterministic policy in the files :meth:`Run.save` wrote as ``stem``."""
        if self.kind == "plant":
            from .shac import SHAC

            return SHAC.load_policy(stem + self.suffix)[0]
        from .sb3_glue import sb3_policy

        return sb3_policy(stem + self.suffix, stem + VECNORMALIZE)[0]

    def sb3_algorithm(self):
        """The Stable-Baselines3 class of an ``"sb3"`` trainer (``ValueError`` for another kind)."""
        if self.kind != "sb3":
            raise ValueError(f"{self.name} is not a Stable-Baselines3 trainer")
        import stable_baselines3

        return getattr(stable_baselines3, self.sb3_class)


# an SB3 run's observation statistics: the file train_sb3.py (and RL Zoo) write in a run's folder,
# and its name beside a model saved as a stem (Run.save: <stem>.zip, <stem>.vecnormalize.pkl)
VECNORMALIZE_FILE = "vecnormalize.pkl"
VECNORMALIZE = "." + VECNORMALIZE_FILE

TRAINERS = {t.name: t for t in (
    Trainer("shac", "SHAC", "plant", ".pt", tune_space={"actor_lr": [0.0005, 0.001]}, tune_chunk=5),
    Trainer("ppo", "PPO", "sb3", ".zip", sb3_class="PPO", tune_space={"learning_rate": [0.0001, 0.0003]},
            tune_chunk=4096),
    Trainer("sac", "SAC", "sb3", ".zip", sb3_class="SAC", tune_space={"learning_rate": [0.0003, 0.001]},
            tune_chunk=4096),
)}
DEFAULT_TRAINER = "shac"  # the project's own: what "pretrained" without a method loads


def trainer(name: str) -> Trainer:
    """The entry of ``name``; ``ValueError`` naming the trainers there are."""
    try:
        return TRAINERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"{name!r} is not a trainer; the trainers are {', '.join(TRAINERS)}") from None


def sb3_trainers() -> tuple[str, ...]:
    """The names of the Stable-Baselines3 trainers."""
    return tuple(n for n, t in TRAINERS.items() if t.kind == "sb3")


class _PlantRun:
    def __init__(self, env_kwargs: dict, seed: int, config=None, compile: bool | None = None):
        import torch

        from .shac import SHAC, SHACConfig

        config = config or SHACConfig()
        compile = config.compile if compile is None else compile
        if compile:
            # each run's compiled step afresh: dynamo's recompile limit (8 a function) counts
            # across the runs of one process, and past it the step runs eager, slower and in other
            # floats (measured in benchmarks/pretrained.py's first run: the second task trained
            # 2.6x slower than the first, the fourth over 21 min where ~4 were expected);
            # Inductor's disk cache keeps the recompiles cheap
            torch._dynamo.reset()
        self.trainer = TRAINERS["shac"]
        self.agent = SHAC(dataclasses.replace(config, compile=compile, seed=seed), env_kwargs)

    @property
    def env_steps(self) -> int:
        return self.agent.env_steps

    def train_to(self, steps: int) -> list[dict]:
        if steps <= self.env_steps:  # a window can overshoot the next point: nothing to do
            return []
        return self.agent.train(env_steps=steps, log=None)

    def train_chunk(self, n: int) -> list[dict]:
        return self.agent.train(iterations=n, log=None)

    def policy(self):
        return self.agent.policy

    def save(self, stem: str) -> list[str]:
        self.agent.save(stem + self.trainer.suffix)
        return [stem + self.trainer.suffix]


class _SB3Run:
    def __init__(self, name: str, hp: dict, env_kwargs: dict, seed: int):
        from .sb3_glue import make_model

        self.trainer = TRAINERS[name]
        self.model = make_model(name, hp, env_kwargs, seed=seed)

    @property
    def env_steps(self) -> int:
        return int(self.model.num_timesteps)

    def train_to(self, steps: int) -> list[dict]:
        if steps > self.env_steps:
            self.model.learn(total_timesteps=steps - self.env_steps, reset_num_timesteps=False)
        return []

    def train_chunk(self, n: int) -> list[dict]:
        return self.train_to(self.env_steps + n)

    def policy(self):
        from .sb3_glue import model_policy

        return model_policy(self.model)

    def save(self, stem: str) -> list[str]:
        """SB3's own files: the model, and its observation normaliser beside it (where it has one)."""
        from stable_baselines3.common.vec_env import VecNormalize

        self.model.save(stem + self.trainer.suffix)
        out = [stem + self.trainer.suffix]
        if isinstance(self.model.get_env(), VecNormalize):
            self.model.get_env().save(stem + VECNORMALIZE)
            out.append(stem + VECNORMALIZE)
        return out
