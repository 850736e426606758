"""``Dyn4Env``: the Gymnasium face of the task core, one car, numpy in and out."""

from __future__ import annotations

import gymnasium as gym

from .config import EnvConfig
from .inputs import OwnSpec, check_actions, check_seed, seed_keys, seed_to_key, to_numpy_info
from .vector import BatchRunner

UNLIMITED = 10**7  # EnvConfig.episode_steps's bound: no truncation of the env's own (TimeLimit's instead)

__all__ = ["Dyn4Env", "check_actions", "check_seed", "seed_keys", "seed_to_key", "to_numpy_info"]


class Dyn4Env(gym.Env):
    """Drive the Humvee along a course over rough, mixed-friction ground (the contract: docs/env.md).

    ## Description
    A four-wheel vehicle (the ``dyn4`` plant: roll, pitch, load transfer, Pacejka tires in a
    friction ellipse) follows a seeded, smooth course a few hundred metres long over rolling
    hills, friction patches (mu 0.4 to 1.0) and bumps, near a target speed, inside a corridor,
    using little energy. Control runs at 20 Hz; the plant takes 0.01 s substeps.

    ## Action space
    ``Box(-1, 1, (2,), float32)``: ``[steer, longitudinal]``. Steer scales to the max steer angle
    (0.528 rad); longitudinal ``> 0`` drives up to ``a_drive`` (3 m/s^2), ``< 0`` brakes up to
    ``a_brake`` (13.2 m/s^2). Actions outside the box are clipped to it; NaN, inf, a wrong shape
    or dtype raise ``ValueError`` and leave the env's state untouched.

    ## Observation space
    ``Box(-10, 10, (30,), float32)``: each entry is ``value / scale`` clipped to +-10.

    | index | entry | unit | scale |
    |---|---|---|---|
    | 0-2 | vx, vy, yaw rate (body frame) | m/s, m/s, rad/s | 10, 2, 1 |
    | 3-6 | roll, pitch, roll rate, pitch rate | rad, rad, rad/s | 0.1, 0.05, 0.5, 0.5 |
    | 7-8 | steer and drive lag states | rad, m/s^2 | max steer, 5 |
    | 9-12 | wheel loads FL, FR, RL, RR relative to static, minus 1 | - | 1 |
    | 13-16 | friction under the wheels | - | 1 |
    | 17 | cross-track error (left +) | m | corridor half-width |
    | 18 | heading error (yaw minus course heading) | rad | 0.5 |
    | 19 | target speed | m/s | 10 |
    | 20-29 | course points 5, 10, 20, 30, 40 m ahead, (x, y) in the body frame | m | 20 |

    ## Rewards
    A weighted sum of named terms (``dyn4_gym.envs.rewards``), each in ``info["reward_terms"]``
    unweighted: ``progress`` (metres along the course, integrated over the substeps, paid up to the
    target speed: ``progress_cap``), ``speed``,
    ``cross_track``, ``heading``, ``energy`` (positive drive work from the books / m g),
    ``tire_slip`` and ``damper`` (dissipation from the books / m g), ``comfort``, ``action_rate``
    and ``termination`` (-1 on failure). ``info["books"]`` has the step's energy lines [J].

    ## Starting state
    At the course's start, heading along it, settled on the terrain, at the target speed;
    ``start_s``, ``start_offset`` and ``start_heading`` (also as reset options) move the start
    along the course, across it and off its heading.

    ## Episode end
    Terminated when the car leaves the corridor or rolls past ``roll_limit`` at any substep, when
    its state stops being finite (``info["nonfinite"]``), or at the course's end
    (``info["success"]``); truncated after 800 steps: ``max_episode_steps`` (the registered 800, or
    ``gym.make(..., max_episode_steps=N)``) through Gymnasium's ``TimeLimit``, or the config's
    ``episode_steps`` when it is given or the env is made without ``gym.make``.

    ## Arguments
    Keyword arguments are :class:`dyn4_gym.envs.config.EnvConfig` fields, nested as dicts:
    ``vehicle`` (plant overrides), ``course``, ``ground``, ``target_speed``, ``start_speed``,
    ``control_dt``, ``hdt``, ``episode_steps``, ``progress_cap``, ``roll_limit``, ``reward_weights``,
    ``reward_terms``, ``dtype``, ``device``, ``compile`` (``torch.compile`` the torch engine's step),
    ``engine`` (``"auto"``: the Numba kernel on the CPU; ``"numba"``; ``"torch"``: the torch task
    core, docs/env.md "Engines"); plus ``render_mode``. ``reset(options=...)`` takes
    the same keys (``course``, ``ground``, ``reward_weights``...) for the next episodes.

    ``ground={"kind": name, ...}`` picks a registered terrain kind (``"rough"`` by default,
    ``"grid"`` from arrays, or one added with ``dyn4_gym.ground.register_terrain``).

    ## Version history
    - v1: the progress term is paid up to the target speed only (``progress_cap=1.0``): under v0
      a learner discounting at 0.99 earned more per step by driving faster than the target
      (docs/env.md, "Versions").
    - v0: first release (unreleased changes since its first build: passive dampers and midpoint
      vertical springs in the plant, docs/plant.md, move trajectories slightly); still registered,
      with ``progress_cap=None``.
    """

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": 20}
    spec = OwnSpec()  # the caller's keyword arguments, copied (envs/inputs.py)

    def __init__(self, render_mode: str | None = None, **kwargs):
        from .render import check_render_mode

        check_render_mode(render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self._runner = BatchRunner(EnvConfig.from_dict(kwargs), 1)
        self.action_space, self.observation_space = self._runner.core.spaces()
        self._renderer = None

    def _spec_set(self, spec):
        """``gym.make`` hands its spec over, then wraps the env in ``TimeLimit`` (the registered
        800 steps, or ``gym.make(..., max_episode_steps=N)``): Gymnasium's limit is then the
        episode limit, so the env's own truncation is lifted (unless ``episode_steps`` was given,
        which stays the env's limit). ``gym.make_vec`` gives the vector env the same limit
        (:class:`Dyn4VectorEnv`), so every face truncates at the same step."""
        from gymnasium.envs.registration import registry

        reg = registry.get(spec.id)
        if ("episode_steps" not in spec.kwargs and reg is not None and reg.max_episode_steps is not None
                and self._runner.state is None and self.config.episode_steps != UNLIMITED):
            self._runner.set_episode_steps(UNLIMITED)  # no second build of the task (issue 49)
        return spec

    @property
    def config(self) -> EnvConfig:
        return self._runner.config

    @property
    def core(self):
        """The task (:class:`TaskCore`): parameters, reward terms and weights."""
        return self._runner.core

    @property
    def engine(self) -> str:
        """The engine that steps this env: ``"numba"`` or ``"torch"`` (``EnvConfig.engine``)."""
        return self._runner.engine.name

    @property
    def state(self):
        """The engine's state of the car (a :class:`TaskState` on torch, a ``NumbaState`` on numba)."""
        return self._runner.state

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode. ``options`` take ``EnvConfig`` keys for this and later episodes.

        Transactional: the seed and the whole new configuration are checked (and the new task
        core built) before anything changes, so a rejected call (``ValueError`` / ``ConfigError``)
        leaves the config, the RNG and the state exactly as they were.
        """
        seed = check_seed(seed)
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options must be a dict, got {type(options).__name__}")
        obs = self._runner.reset(None if seed is None else [seed], None, options)
        super().reset(seed=seed)  # nothing above changed the env unless it all passed
        return obs[0], {"seed_key": int(self._runner.keys[0]), "episode": int(self._runner.episodes[0])}

    def step(self, action):
        self._runner.check_started()
        a = check_actions(action, None, self._runner.core.n_action)
        out = self._runner.step_one(a)
        if self.render_mode == "human":
            self.render()
        return out

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='rgb_array' to gym.make")
            return None
        if self._runner.state is None:
            raise RuntimeError("call reset() before render()")
        from .render import renderer_for

        self._renderer = renderer_for(self._renderer, self.core, human=self.render_mode == "human")
        frame = self._renderer.draw(self._runner.task_state(), 0)
        return None if self.render_mode == "human" else frame

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __getstate__(self):
        d = self.__dict__.copy()
        d["_renderer"] = None
        return d
