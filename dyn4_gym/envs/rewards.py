"""Named reward terms. The reward is ``sum_name weight[name] * term[name](ctx)``.

Each term returns its value per row, unweighted and signed (progress is positive, every cost
negative), so weights are non-negative. ``info["reward_terms"]`` carries every term unweighted.
Energy terms come from the plant's books over the step, in metres of lift: work divided by the
car's weight ``m g`` (1 m of ``energy`` = the work that would lift the car 1 m). ``energy`` is the
positive work at the contact patches; ``fuel`` (``action="driver"`` only) the fuel burned for it,
which also pays the engine's, converter's and driveline's losses.

Users add a term with :func:`register_reward_term` (or pass term objects in the env's
``reward_terms``) and give it a weight by name; an unknown name is an error, never a silent 0.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import torch

from .._checks import ConfigError, check_range
from ..model.state import DYN4, DYN4_NAMES
from ..model.task import DEFAULT_WEIGHTS as MODEL_WEIGHTS, REWARD_TERM_TABLE

MAX_WEIGHT = 1e4  # a weight's bound: keeps every weighted term of a finite step finite

__all__ = ["MAX_WEIGHT", "StepContext", "RewardTerm", "evaluate_term", "DEFAULT_WEIGHTS", "REWARD_TERMS", "register_reward_term", "resolve_terms"]


@dataclass(frozen=True)
class StepContext:
    """What a term may read about one env step, each ``(B,)`` unless noted."""

    progress: torch.Tensor  # [m] distance along the course over the step's substeps
    speed: torch.Tensor  # [m/s] forward speed vx at the step's end
    target_speed: torch.Tensor  # [m/s]
    cross_track: torch.Tensor  # [m] signed, left +, at the step's end
    half_width: float  # [m]
    heading_error: torch.Tensor  # [rad] yaw minus course heading, wrapped
    books: dict  # the step's energy lines [J], each (B,)
    weight: torch.Tensor  # [N] m g
    action: torch.Tensor  # (B, 2) clipped action, (B, 3) for action="driver"
    prev_action: torch.Tensor  # the same shape
    roll_rate: torch.Tensor  # [rad/s]
    pitch_rate: torch.Tensor  # [rad/s]
    failed: torch.Tensor  # bool: left the corridor, rolled over or went non-finite
    success: torch.Tensor  # bool: reached the course's end
    progress_cap: torch.Tensor | float = math.inf  # [m] the most progress one step is paid for (EnvConfig.progress_cap)
    control_dt: float = 0.0  # [s] one env step
    elapsed: torch.Tensor | float = 0.0  # [s] since the episode's start, at the step's end
    time_budget: float = math.inf  # [s] EnvConfig.time_budget (inf: none)
    s: torch.Tensor | float = 0.0  # [m] arc length along the course at the step's end
    s_start: torch.Tensor | float = 0.0  # [m] arc length at the step's start
    goal: float = math.inf  # [m] the arc length that finishes the course (course.goal_arc)
    pace: float = math.inf  # [s] when the schedule's uniform pace reaches the goal (EnvConfig.pace; inf: no budget)
    # (B, 14) the plant's state at the step's end in the seeds' layout (model/state.py, DYN4); read
    # it by name: ctx.var("r"), or the properties below
    state: torch.Tensor | None = None

    def var(self, name: str) -> torch.Tensor:
        """The plant state's entry ``name`` (one of ``DYN4_NAMES``: x, y, psi, vx, vy, r, z, phi,
        theta, zd, phid, thetad, delta, a; units as docs/plant.md) at the step's end, ``(B,)``."""
        if self.state is None:
            raise ValueError("this StepContext carries no plant state (state=None)")
        if name not in DYN4_NAMES:
            raise ValueError(f"no plant state named {name!r}; the names are {', '.join(DYN4_NAMES)}")
        return self.state[:, DYN4[name.upper()]]

    @property
    def x(self) -> torch.Tensor:
        """[m] world X of the CG's ground projection at the step's end."""
        return self.var("x")

    @property
    def y(self) -> torch.Tensor:
        """[m] world Y of the CG's ground projection at the step's end."""
        return self.var("y")

    @property
    def yaw(self) -> torch.Tensor:
        """[rad] yaw psi, counter-clockwise from +X, as the plant integrates it (not wrapped), at the
        step's end."""
        return self.var("psi")

    @property
    def vy(self) -> torch.Tensor:
        """[m/s] lateral speed, body frame (y left), at the step's end."""
        return self.var("vy")

    @property
    def yaw_rate(self) -> torch.Tensor:
        """[rad/s] yaw rate r (counter-clockwise +) at the step's end."""
        return self.var("r")


@dataclass(frozen=True)
class RewardTerm:
    """A named term: ``fn(ctx) -> (B,)`` tensor, unweighted."""

    name: str
    fn: Callable[[StepContext], torch.Tensor]
    doc: str = ""

    def __call__(self, ctx: StepContext) -> torch.Tensor:
        return self.fn(ctx)


def progress(c: StepContext) -> torch.Tensor:
    # capped at the target speed's distance: past the target, going faster earns nothing
    return torch.minimum(c.progress, torch.as_tensor(c.progress_cap, dtype=c.progress.dtype, device=c.progress.device))


def speed(c: StepContext) -> torch.Tensor:
    return -((c.speed - c.target_speed) / c.target_speed) ** 2


def cross_track(c: StepContext) -> torch.Tensor:
    return -(c.cross_track / c.half_width) ** 2


def heading(c: StepContext) -> torch.Tensor:
    return -(c.heading_error**2)


def energy(c: StepContext) -> torch.Tensor:
    return -c.books["supplied"].clamp_min(0.0) / c.weight


def fuel(c: StepContext) -> torch.Tensor:
    # only the driver variant burns fuel (action="driver"); the acceleration action has no books for it
    if "fuel" not in c.books:
        return torch.zeros_like(c.progress)
    return -c.books["fuel"] / c.weight


def tire_slip(c: StepContext) -> torch.Tensor:
    return -c.books["tire"] / c.weight


def damper(c: StepContext) -> torch.Tensor:
    return -c.books["damper"] / c.weight


def comfort(c: StepContext) -> torch.Tensor:
    return -(c.roll_rate**2 + c.pitch_rate**2)


def action_rate(c: StepContext) -> torch.Tensor:
    return -((c.action - c.prev_action) ** 2).sum(-1)


def termination(c: StepContext) -> torch.Tensor:
    return -c.failed.to(c.progress.dtype)


def time(c: StepContext) -> torch.Tensor:
    # the step's time in metres at the target speed: with progress, a finished course's return is
    # its length minus target_speed x (time to finish), so time is the metric (the race task)
    return -(c.target_speed * c.control_dt)


def late(c: StepContext) -> torch.Tensor:
    # each step past the budget costs what the time term would: the eco task's deadline
    over = torch.as_tensor(c.elapsed, dtype=c.progress.dtype, device=c.progress.device) > c.time_budget
    return torch.where(over, -(c.target_speed * c.control_dt), torch.zeros_like(c.progress))


def behind(t, s, budget: float, goal: float):
    """[s] how far a car at arc length ``s`` [m] at time ``t`` [s] is behind the uniform pace that
    reaches ``goal`` [m] at ``budget`` [s]; 0 when on or ahead of it. At the goal it is the car's
    lateness past the budget."""
    return (t - s * (budget / goal)).clamp_min(0.0)


def schedule(c: StepContext) -> torch.Tensor:
    # the late term's cost, paid as the car falls behind instead of after the budget: minus the
    # growth of behind() over the step at the time term's rate (target speed), so its steps sum to
    # -target_speed x (lateness at arrival) (a potential-based form of late; docs/env.md); its pace
    # reaches the goal at c.pace, EnvConfig.schedule_margin before the budget
    if not math.isfinite(c.pace):
        return torch.zeros_like(c.progress)
    as_t = lambda v: torch.as_tensor(v, dtype=c.progress.dtype, device=c.progress.device)  # noqa: E731
    t1, pace = as_t(c.elapsed), c.pace
    grow = behind(t1, as_t(c.s), pace, c.goal) - behind(t1 - c.control_dt, as_t(c.s_start), pace, c.goal)
    return -c.target_speed * grow


# module-level functions, so envs (and their terms) pickle for subprocess vector envs; their
# names, order, docs and default weights are the model layer's (model/task.py)
_FUNCTIONS = {"progress": progress, "speed": speed, "cross_track": cross_track, "heading": heading, "energy": energy,
              "fuel": fuel, "tire_slip": tire_slip, "damper": damper, "comfort": comfort, "action_rate": action_rate,
              "termination": termination, "time": time, "late": late,
              "schedule": schedule}
REWARD_TERMS: dict[str, RewardTerm] = {name: RewardTerm(name, _FUNCTIONS[name], doc)
                                       for name, _, doc in REWARD_TERM_TABLE}
# the built-ins as shipped (the numba engine computes these in its kernel; see engine/numba_task.py)
REWARD_TERMS_BUILTIN: dict[str, RewardTerm] = dict(REWARD_TERMS)
DEFAULT_WEIGHTS = dict(MODEL_WEIGHTS)


def evaluate_term(name: str, term, ctx: StepContext, B: int, dtype: torch.dtype) -> torch.Tensor:
    """``term(ctx)`` as a ``(B,)`` tensor of ``dtype``, checked; the one way every engine runs a term.

    A term that is not a shipped built-in runs on its own copy of the context, so it cannot change
    the car or the step by writing into its inputs (a write is an error that names the field;
    under ``torch.compile`` the copy still shields the step, unreported).
    Its output must be a ``(B,)`` tensor of a real dtype (bool and integer values are converted);
    a non-finite value is the non-finite guard's to flag (``info["nonfinite"]``). Raises
    ``ValueError`` (the env's state is left as it was).
    """
    trusted = REWARD_TERMS_BUILTIN.get(name) is term
    if trusted:
        v = term(ctx)
    else:
        # torch.compile cannot trace a tensor's _version: reading it split the compiled step at
        # every term, and each term's name became a recompile of this function (past the limit
        # of 8, the step fell back to eager). Compiled, the term still runs on its own copy, so a
        # write cannot reach the step; only the eager step (and the Numba engine's) reports it.
        compiling = _is_compiling()
        own, versions = _copy_context(ctx, track=not compiling)
        v = term(own)
        for field, t in versions:
            if t[0]._version != t[1]:
                raise ValueError(f"reward term {name!r} wrote into its context ({field}); a term must not "
                                 "change its inputs: compute on a copy")
    if not isinstance(v, torch.Tensor) or v.shape != (B,):
        raise ValueError(f"reward term {name!r} must return a tensor of shape ({B},), got "
                         f"{getattr(v, 'shape', type(v).__name__)}")
    if v.is_complex():
        raise ValueError(f"reward term {name!r} must return real values, got dtype {v.dtype}")
    return v if v.dtype == dtype else v.to(dtype)


def _is_compiling() -> bool:
    """True while torch.compile traces (torch.compiler.is_compiling; torch._dynamo's before 2.3)."""
    fn = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling
    return bool(fn())


def _copy_context(ctx: StepContext, track: bool = True):
    """A copy of ``ctx`` with every tensor cloned (gradients flow through a clone), and (with
    ``track``) each clone's ``(tensor, version)`` by field, to find a term that writes into one."""
    versions, values = [], {}
    for f in dataclasses.fields(ctx):
        v = getattr(ctx, f.name)
        if isinstance(v, torch.Tensor):
            v = v.clone()
            if track:
                versions.append((f.name, (v, v._version)))
        elif isinstance(v, dict):
            v = {k: t.clone() for k, t in v.items()}
            if track:
                versions += [(f"{f.name}[{k!r}]", (t, t._version)) for k, t in v.items()]
        values[f.name] = v
    return StepContext(**values), versions


def register_reward_term(term: RewardTerm, overwrite: bool = False) -> RewardTerm:
    """Make a term available by name to every env (weight it with ``reward_weights``)."""
    if not isinstance(term, RewardTerm):
        raise TypeError("register_reward_term takes a RewardTerm(name, fn)")
    if term.name in REWARD_TERMS and not overwrite:
        raise ValueError(f"a reward term named {term.name!r} exists; pass overwrite=True to replace it")
    REWARD_TERMS[term.name] = term
    return term


def resolve_terms(weights: dict, extra: tuple = (), path: str = "config") -> tuple[dict, dict]:
    """Validate weights by name; returns ``(terms, weights)`` with the defaults filled in.

    Terms named in ``weights`` or given in ``extra`` are used; the default weight of a term that
    is not a built-in is 0 only if it was given in ``extra`` without a weight.
    """
    terms = dict(REWARD_TERMS)
    for t in extra:
        if not isinstance(t, RewardTerm):
            raise ConfigError(f"{path}.reward_terms must hold RewardTerm objects, got {type(t).__name__}")
        if t.name in terms:
            raise ConfigError(f"{path}.reward_terms: a term named {t.name!r} exists already; give yours another name")
        terms[t.name] = t
    out = dict(DEFAULT_WEIGHTS)
    for t in extra:
        out.setdefault(t.name, 1.0)
    for name, w in weights.items():
        if name not in terms:
            raise ConfigError(f"{path}.reward_weights.{name} is not a reward term (known: {sorted(terms)})")
        check_range(f"{path}.reward_weights.{name}", w, 0.0, MAX_WEIGHT)
        out[name] = float(w)
    return {n: terms[n] for n in out}, out
