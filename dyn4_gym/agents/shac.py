"""Short-horizon actor-critic through the plant (SHAC; Xu et al., "Accelerated Policy Learning
with Parallel Differentiable Simulation", ICLR 2022), reimplemented from the paper's equations.

Each iteration rolls ``num_envs`` cars for ``horizon`` steps with gradients on, and minimises

    L_actor = -1 / (N h) sum_i [ sum_{t < h_i} gamma^t r_t + gamma^{h_i} V_target(s_{h_i}) ]

where each row's window ends at its reset or at ``h``: a termination ends it with no bootstrap,
a truncation or the window's end bootstraps with the target critic. The gradient is cut between
windows (``Dyn4DiffEnv.detach``) and at resets (a reset row's new state does not depend on its
old one). The actor's gradient is clipped to a global norm. The critic regresses TD(lambda)
targets built from the window's rewards and the target critic, and the target critic follows
it by Polyak averaging. Observations are normalised by running statistics (no gradient through
them). ``critic=False`` gives the ablation: plain truncated BPTT with no value bootstrap.

The policy is Gaussian in a pre-``tanh`` space with a learned state-independent log-std; its
actions are ``tanh``-squashed into the action box; evaluation uses the mean.
"""

from __future__ import annotations

import os

import dataclasses
import json
import math
import time
from dataclasses import dataclass

import torch
from torch import nn

from .._checks import CheckpointError
from ..cli import strict_json
from ..envs import Dyn4DiffEnv, EnvConfig
from ..model.task import obs_scale
from .barriers import termination_barrier

__all__ = ["SHACConfig", "shac_published", "SHAC", "SHACPolicy", "RunningNorm", "Actor", "Critic", "CheckpointError", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "dyn4-gym-shac-1"


def _why(exc: Exception) -> str:
    """One short line for an error message."""
    if isinstance(exc, __import__("pickle").UnpicklingError):
        return "not a torch checkpoint of tensors and plain data"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160] if text else ''}"


@dataclass(frozen=True)
class SHACConfig:
    """Hyperparameters (defaults close to the paper's, scaled to this task)."""

    num_envs: int = 32  # parallel cars (32 x 32 steps a window: chosen on validation courses, docs/training.md)
    horizon: int = 32  # window length h [env steps]
    gamma: float = 0.99
    lam: float = 0.95  # TD(lambda)
    actor_lr: float = 2e-3
    critic_lr: float = 2e-3
    critic_iters: int = 8  # critic passes over each window's data
    critic_minibatches: int = 4
    target_alpha: float = 0.2  # target <- alpha target + (1 - alpha) critic
    grad_norm: float = 1.0  # global-norm clip of the actor's gradient
    # both learning rates fall linearly to 0 at this many env steps (the paper's schedule); None: constant
    lr_decay_steps: int | None = None
    # Adam's (beta1, beta2): torch's defaults; the paper's schedule uses (0.7, 0.95) (SHAC_PUBLISHED)
    betas: tuple = (0.9, 0.999)
    hidden: tuple = (64, 64)
    init_log_std: float = -1.0
    # how the actor drives the pedals of action="driver" (Actor): "box", each pedal squashed into
    # [0, 1] on its own (both start half pressed); "one", one longitudinal output for both, the
    # throttle on its positive side and the brake on its negative (the policy starts coasting,
    # and the pedals never press together); "symmetric", the same with the brake's side scaled so
    # that near coasting a step of the output is as much braking as driving (the spec's largest
    # drive over its largest brake deceleration; Actor), so training noise does not brake more
    # than it drives. All are the same for action="accel".
    pedals: str = "box"
    critic: bool = True  # False: truncated BPTT ablation
    # AHAC's adaptive horizon (Georgiev et al., "Adaptive Horizon Actor-Critic for Policy Learning
    # in Contact-Rich Differentiable Simulation", ICML 2024: cut the model-based horizon where the
    # dynamics are stiff), in its per-row form: a row's window ends at a step whose tire-slip
    # dissipation over m g [m] (the books' `tire` line, the `tire_slip` reward's unit) exceeds
    # this, bootstrapping from the target critic there, and its gradient is cut (the tire past
    # its peak is this plant's stiff regime, as contact is a legged robot's). None: fixed windows.
    # Measured on the race's validation courses, 10 seeds: no better than fixed windows, so off
    # (docs/sweeps.md, "An adaptive horizon").
    stiff_cut: float | None = None
    # smooth surrogates of the termination in the training reward (issue 44; agents/barriers.py):
    # each step pays edge_barrier relu(|e| - (h - edge_margin))^2 [per m^2] near the corridor's
    # edge and roll_barrier relu(|phi| - roll_frac phi_max)^2 [per rad^2] near the roll limit, so
    # the gradient through the plant feels a limit before the flag that ends the episode (which
    # has none). The actor's loss and the critic's targets see them; the reported returns and
    # every evaluation are the task's. 0: off.
    edge_barrier: float = 0.0
    edge_margin: float = 1.0  # [m] the corridor's barrier starts this far inside its edge
    roll_barrier: float = 0.0
    roll_frac: float = 0.8  # the roll barrier starts at this share of the env's roll_limit
    # the finite-horizon critic (issue 44, item 5): the episode's step limit is the horizon's end,
    # and the env observes the clock that counts down to it (observe_clock: the time left against
    # the budget, which fixes the time to the limit), so a truncated row is a finished one: no
    # bootstrap from the critic there, and with gamma = 1 the critic estimates the undiscounted
    # return to go from the state and the time left. Needs an env with observe_clock (the eco
    # tasks from -v1); False: a truncation bootstraps (the usual time-limit treatment)
    finite_horizon: bool = False
    compile: bool = False  # torch.compile the env step with its backward (TaskCore.compiled_step)
    seed: int = 0

    def validate(self) -> None:
        """``ValueError`` for a value out of its bounds. Sizes are bounded too, so a crafted
        checkpoint cannot make its loader allocate without limit."""
        for name, hi in _SIZE_BOUNDS.items():
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= hi):
                raise ValueError(f"SHACConfig.{name} must be an int in [1, {hi}], got {v!r}")
        if not (isinstance(self.hidden, tuple) and 1 <= len(self.hidden) <= _MAX_LAYERS
                and all(isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= _MAX_WIDTH for h in self.hidden)):
            raise ValueError(f"SHACConfig.hidden must be 1 to {_MAX_LAYERS} layer widths in [1, {_MAX_WIDTH}], "
                             f"got {self.hidden!r}")
        if not (isinstance(self.init_log_std, (int, float)) and -20.0 <= self.init_log_std <= 5.0):
            raise ValueError(f"SHACConfig.init_log_std must lie in [-20, 5], got {self.init_log_std!r}")
        if not isinstance(self.finite_horizon, bool):
            raise ValueError(f"SHACConfig.finite_horizon must be true or false, got {self.finite_horizon!r}")
        if self.pedals not in PEDALS:
            raise ValueError(f"SHACConfig.pedals must be one of {PEDALS}, got {self.pedals!r}")
        if not (isinstance(self.seed, int) and 0 <= self.seed < 2**63):
            raise ValueError(f"SHACConfig.seed must be an int in [0, 2**63), got {self.seed!r}")
        if self.stiff_cut is not None and not (isinstance(self.stiff_cut, (int, float)) and not isinstance(self.stiff_cut, bool)
                                               and 0 < self.stiff_cut < math.inf):
            raise ValueError(f"SHACConfig.stiff_cut must be a positive number [m] or None, got {self.stiff_cut!r}")
        if self.lr_decay_steps is not None and not (isinstance(self.lr_decay_steps, int) and self.lr_decay_steps >= 1):
            raise ValueError(f"SHACConfig.lr_decay_steps must be a positive int or None, got {self.lr_decay_steps!r}")
        if not (isinstance(self.betas, tuple) and len(self.betas) == 2
                and all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0.0 <= b < 1.0 for b in self.betas)):
            raise ValueError(f"SHACConfig.betas must be two numbers in [0, 1), got {self.betas!r}")
        for name in ("gamma", "lam", "target_alpha"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v <= 1):
                raise ValueError(f"SHACConfig.{name} must lie in [0, 1], got {v!r}")
        for name in ("edge_barrier", "edge_margin", "roll_barrier"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf):
                raise ValueError(f"SHACConfig.{name} must be a finite number >= 0, got {v!r}")
        if not (isinstance(self.roll_frac, (int, float)) and not isinstance(self.roll_frac, bool) and 0 < self.roll_frac <= 1):
            raise ValueError(f"SHACConfig.roll_frac must lie in (0, 1], got {self.roll_frac!r}")
        for name in ("actor_lr", "critic_lr", "grad_norm"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v < math.inf):
                raise ValueError(f"SHACConfig.{name} must be positive, got {v!r}")


def shac_published(budget: int, **overrides) -> SHACConfig:
    """The paper's optimiser schedule (Xu et al. 2022, its appendix's SHAC settings) for a run of
    ``budget`` env steps: Adam betas (0.7, 0.95), both learning rates falling linearly to 0 at the
    budget, 64 cars a window, 16 critic passes over each window; the rest :class:`SHACConfig`'s
    defaults unless overridden."""
    return SHACConfig(**{**dict(betas=(0.7, 0.95), lr_decay_steps=int(budget), num_envs=64, critic_iters=16),
                         **overrides})


PEDALS = ("box", "one", "symmetric")  # SHACConfig.pedals

# the largest sizes a config (and so a checkpoint) may ask for
_SIZE_BOUNDS = dict(num_envs=2**18, horizon=10_000, critic_iters=1_000, critic_minibatches=4_096)
_MAX_LAYERS, _MAX_WIDTH = 16, 8_192


def _mlp(n_in, hidden, n_out):
    layers, d = [], n_in
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ELU()]
        d = h
    layers.append(nn.Linear(d, n_out))
    return nn.Sequential(*layers)


class RunningNorm(nn.Module):
    """Running mean and variance (Chan et al.'s parallel update); ``(x - mean) / std``, clipped."""

    def __init__(self, dim: int, clip: float = 5.0):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4))
        self.clip = clip

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.reshape(-1, x.shape[-1]).to(self.mean.dtype)
        b_mean, b_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        tot = self.count + n
        delta = b_mean - self.mean
        self.mean += delta * n / tot
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / tot) / tot
        self.count = tot

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean.to(x.dtype)) / torch.sqrt(self.var.to(x.dtype) + 1e-8)).clamp(-self.clip, self.clip)


class Actor(nn.Module):
    """A Gaussian in a pre-``tanh`` space squashed into the action box ``[low, high]`` (one entry
    per action: the env's action space, 2 for ``action="accel"``, 3 for ``"driver"``).

    With ``pedals="one"`` and ``driver`` (the box is the driver's ``(steer, throttle, brake)``,
    ``action="driver"``; said by the env, not guessed from the box's size), the Gaussian has two
    entries, steering and ``u``; ``tanh(u)`` presses the throttle where positive and the brake
    where negative (``low + (high - low) max(+-tanh u, 0)``), so the mean starts at coasting,
    not at both pedals half pressed (a car that stops under its brakes has no gradient to move).

    ``pedals="symmetric"`` bends the brake's side: with ``w = max(-tanh u, 0)`` the brake is
    ``r w + (1 - r) w^3``, ``r = brake_ratio`` (the spec's largest drive over its largest brake
    deceleration, 3.0 / 13.2 for the Humvee), so near coasting the brake's slope in deceleration
    equals the throttle's in drive and zero-mean noise on ``u`` does not slow the car on average
    (with ``"one"`` it brakes about 4x harder than it drives, so a policy trained under noise
    learns to press harder than its deterministic self needs); full braking is still reached.
    """

    def __init__(self, obs_dim: int, hidden, init_log_std: float, low=(-1.0, -1.0), high=(1.0, 1.0),
                 pedals: str = "box", brake_ratio: float = 1.0, driver: bool = False):
        super().__init__()
        n = len(low)
        if driver and n != 3:
            raise ValueError(f"Actor: the driver's box has 3 entries (steer, throttle, brake), got {n}")
        self.one_pedal = pedals in ("one", "symmetric") and driver
        self.brake_ratio = float(brake_ratio) if pedals == "symmetric" else 1.0
        n_out = 2 if self.one_pedal else n
        self.net = _mlp(obs_dim, hidden, n_out)
        self.log_std = nn.Parameter(torch.full((n_out,), float(init_log_std)))
        lo, hi = torch.as_tensor(low, dtype=torch.float32), torch.as_tensor(high, dtype=torch.float32)
        # the box's centre and half-width (0 and 1 for [-1, 1]: then exactly tanh); derived from
        # the env, so not saved (old checkpoints load as they are)
        self.register_buffer("loc", (hi + lo) / 2, persistent=False)
        self.register_buffer("half_width", (hi - lo) / 2, persistent=False)
        with torch.no_grad():
            self.net[-1].weight.mul_(0.1)
            self.net[-1].bias.zero_()

    def forward(self, z: torch.Tensor, deterministic: bool = False, generator=None) -> torch.Tensor:
        mu = self.net(z)
        if not deterministic:
            eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=mu.device)
            mu = mu + self.log_std.exp() * eps
        y = torch.tanh(mu)
        if self.one_pedal:
            u = y[..., 1:2]
            width = 2 * self.half_width[1:]
            w = (-u).clamp_min(0.0)
            if self.brake_ratio != 1.0:
                w = self.brake_ratio * w + (1.0 - self.brake_ratio) * w ** 3
            pedals = (self.loc[1:] - self.half_width[1:]) + width * torch.cat((u.clamp_min(0.0), w), -1)
            return torch.cat((self.loc[:1] + self.half_width[:1] * y[..., :1], pedals), -1)
        return self.loc + self.half_width * y


def _brake_ratio(core) -> float:
    """The spec's largest drive acceleration over its largest brake deceleration (Actor's
    ``pedals="symmetric"``)."""
    return float(core.p.a_drive / core.p.a_brake)


def _actor_of(core, config) -> "Actor":
    """The actor for the env of task core ``core`` (its observation, its action box, whether that
    box is the driver's, the car's brake ratio) with ``config``'s network and pedals: the one
    builder of a training run's actor and a checkpoint's."""
    act, _ = core.spaces()
    return Actor(len(core.obs_names), config.hidden, config.init_log_std, act.low.tolist(), act.high.tolist(),
                 pedals=config.pedals, brake_ratio=_brake_ratio(core), driver=core.driver)


class SHACPolicy(nn.Module):
    """A trained SHAC policy alone (observation normaliser and actor): ``policy(obs) -> action``,
    deterministic. :meth:`SHAC.load_policy` builds one from a checkpoint without its training env."""

    def __init__(self, norm: RunningNorm, actor: Actor):
        super().__init__()
        self.norm, self.actor = norm, actor

    @torch.no_grad()
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor(self.norm(obs.float()), deterministic=True)


class Critic(nn.Module):
    def __init__(self, obs_dim: int, hidden):
        super().__init__()
        self.net = _mlp(obs_dim, hidden, 1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z).squeeze(-1)


class SHAC:
    """The trainer. ``env_kwargs`` are ``Dyn4Humvee-v1`` keyword arguments."""

    def __init__(self, config: SHACConfig = SHACConfig(), env_kwargs: dict | None = None):
        config.validate()
        self.config = config
        self.env_kwargs = dict(env_kwargs or {})
        # refused before the env is built (a compiled env's first build is the costly part)
        env_cfg = {k: v for k, v in self.env_kwargs.items() if k != "sync_free"}  # the rest is the env's config
        if config.finite_horizon and not EnvConfig.from_dict(env_cfg).observe_clock:
            raise ValueError("SHACConfig.finite_horizon needs an env that observes the clock (observe_clock=True, "
                             "the eco tasks from -v1): without it the time left is not in the critic's input")
        torch.manual_seed(config.seed)
        self.env = Dyn4DiffEnv(num_envs=config.num_envs, **{**self.env_kwargs, **({"compile": True} if config.compile else {})})
        obs_dim = self.env.obs_dim
        self.device = dev = self.env.core.device  # networks and buffers live where the env does
        self.norm = RunningNorm(obs_dim).to(dev)
        self.actor = _actor_of(self.env.core, config).to(dev)
        self.critic = Critic(obs_dim, config.hidden).to(dev)
        self.target = Critic(obs_dim, config.hidden).to(dev)
        self.target.load_state_dict(self.critic.state_dict())
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=config.actor_lr, betas=config.betas)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=config.critic_lr, betas=config.betas)
        self.gen = torch.Generator(device=dev).manual_seed(config.seed)
        self.obs = self.env.reset(seed=config.seed)
        self.norm.update(self.obs)
        self.env_steps = 0
        self.iterations = 0
        self.episode_returns: list[float] = []
        self.episode_lines: list[dict] = []  # per finished episode: reward terms and energy lines summed
        self._ep_ret = torch.zeros(config.num_envs, device=dev)
        # the barriers read the roll back from the observation: its column and scale
        self._roll_col, self._roll_scale = self.env.core.obs_names.index("roll"), obs_scale("roll")
        self._ep_lines: dict = {}

    # ------------------------------------------------------------------ one window
    def _value(self, net, obs):
        return net(self.norm(obs)) if self.config.critic else torch.zeros(obs.shape[0], dtype=obs.dtype, device=obs.device)

    def iteration(self) -> dict:
        c = self.config
        n, h = c.num_envs, c.horizon
        obs = self.env.detach()  # cut the graph between windows
        dev = self.device
        disc = torch.ones(n, device=dev)
        acc = torch.zeros(n, device=dev)
        loss = torch.zeros((), device=dev)
        buf_obs, buf_rew, buf_term, buf_trunc, buf_final = [], [], [], [], []
        cuts = 0
        weight = self.env.core.p.m * self.env.core.p.g  # [N] m g: the stiffness measure's unit
        barriers = c.edge_barrier > 0 or c.roll_barrier > 0
        for t in range(h):
            z = self.norm(obs)
            action = self.actor(z, generator=self.gen)
            nxt, r, term, trunc, info = self.env.step(action)
            r = r.float()
            shaped = r - self._barrier(info) if barriers else r  # the training reward: the task's, less the surrogates
            acc = acc + disc * shaped
            done = term | trunc
            if c.finite_horizon:  # the step limit ends the horizon: a truncated row finished (no bootstrap)
                term, trunc = done, torch.zeros_like(trunc)
            with torch.no_grad():
                self._ep_ret += r.detach()
                for group in ("reward_terms", "books"):
                    for k, v in info[group].items():
                        key = f"{'term' if group == 'reward_terms' else 'books'}/{k}"
                        self._ep_lines[key] = self._ep_lines.get(key, 0.0) + v.detach().double()
                for i in torch.nonzero(done).flatten().tolist():
                    self.episode_returns.append(float(self._ep_ret[i]))
                    self.episode_lines.append({k: float(v[i]) for k, v in self._ep_lines.items()})
                self._ep_ret = torch.where(done, torch.zeros_like(self._ep_ret), self._ep_ret)
                self._ep_lines = {k: torch.where(done, torch.zeros_like(v), v) for k, v in self._ep_lines.items()}
            final = info["final_obs"]
            boot_trunc = self._value(self.target, final) * (trunc & ~term).float()
            if t == h - 1:  # the window closes every row: running ones bootstrap from the target critic
                ends = torch.ones_like(done)
                boot_end = self._value(self.target, nxt) * (~done).float()
            elif c.stiff_cut is not None:  # AHAC: a row's window also closes at a stiff step
                stiff = (info["books"]["tire"].detach() / weight > c.stiff_cut) & ~done
                cuts += int(stiff.sum())
                ends, boot_end = done | stiff, self._value(self.target, nxt) * stiff.float()
                if bool(stiff.any()):  # the next window of those rows starts here
                    self.env.detach_rows(stiff)
                    nxt = torch.where(stiff[:, None], nxt.detach(), nxt)
            else:
                ends, boot_end = done, 0.0
            closing = (acc + disc * c.gamma * (boot_trunc + boot_end)) * ends.float()
            loss = loss - closing.sum()
            disc = torch.where(ends, torch.ones_like(disc), disc * c.gamma)
            acc = torch.where(ends, torch.zeros_like(acc), acc)
            buf_obs.append(obs.detach())
            buf_rew.append(shaped.detach())
            buf_term.append(term)
            buf_trunc.append(trunc & ~term)
            buf_final.append(final.detach())
            obs = nxt
        loss = loss / (n * h)
        self._set_lr()
        self.actor_opt.zero_grad()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.actor.parameters(), c.grad_norm)
        finite = bool(torch.isfinite(gnorm))
        if finite:
            self.actor_opt.step()
        self.obs = obs.detach()
        self.env_steps += n * h
        self.iterations += 1
        critic_loss = self._fit_critic(buf_obs, buf_rew, buf_term, buf_trunc, buf_final, obs.detach()) if c.critic else 0.0
        self.norm.update(torch.stack(buf_obs))
        # the window's gradient before clipping: its norm, and whether the clip bound it (diagnostics)
        # stiff_cut_share: the share of steps at which a row's window was cut (AHAC)
        return dict(actor_loss=float(loss.detach()), grad_norm=float(gnorm), grad_clipped=bool(gnorm > c.grad_norm),
                    grad_finite=finite, critic_loss=critic_loss, env_steps=self.env_steps,
                    stiff_cut_share=cuts / (n * max(h - 1, 1)))

    def _barrier(self, info: dict) -> torch.Tensor:
        """The termination's surrogates at a step's end ``(B,)`` (agents/barriers.py), from its
        cross-track error and the roll read back from the observation it ended with."""
        c, core = self.config, self.env.core
        roll = info["final_obs"][:, self._roll_col] * self._roll_scale
        return termination_barrier(info["cross_track"], roll, core.cfg.course.half_width, core.cfg.roll_limit,
                                   c.edge_margin, c.edge_barrier, c.roll_frac, c.roll_barrier).float()

    def _set_lr(self) -> None:
        """The learning rates at this many env steps (``lr_decay_steps``: linear to 0)."""
        c = self.config
        frac = 1.0 if c.lr_decay_steps is None else max(1.0 - self.env_steps / c.lr_decay_steps, 0.0)
        for opt, lr in ((self.actor_opt, c.actor_lr), (self.critic_opt, c.critic_lr)):
            for group in opt.param_groups:
                group["lr"] = lr * frac

    @torch.no_grad()
    def _targets(self, obs, rew, term, trunc, final, last_obs):
        c = self.config
        h = len(rew)
        v_next = [self.target(self.norm(o)) for o in obs[1:]] + [self.target(self.norm(last_obs))]
        v_final = [self.target(self.norm(f)) for f in final]
        G = v_next[-1]
        out = [None] * h
        for t in reversed(range(h)):
            done = term[t] | trunc[t]
            nxt = torch.where(trunc[t], v_final[t], v_next[t])
            nxt = torch.where(term[t], torch.zeros_like(nxt), nxt)
            G_next = torch.where(done, nxt, G)
            G = rew[t] + c.gamma * ((1 - c.lam) * nxt + c.lam * G_next)
            out[t] = G
        return torch.stack(out)

    def _fit_critic(self, obs, rew, term, trunc, final, last_obs) -> float:
        c = self.config
        targets = self._targets(obs, rew, term, trunc, final, last_obs).reshape(-1)
        z = self.norm(torch.stack(obs)).reshape(-1, obs[0].shape[-1]).detach()
        m = z.shape[0]
        total = 0.0
        for _ in range(c.critic_iters):
            perm = torch.randperm(m, generator=self.gen, device=self.device)
            for chunk in perm.chunk(c.critic_minibatches):
                loss = ((self.critic(z[chunk]) - targets[chunk]) ** 2).mean()
                self.critic_opt.zero_grad()
                loss.backward()
                self.critic_opt.step()
                total += float(loss.detach())
        with torch.no_grad():
            for pt, pc in zip(self.target.parameters(), self.critic.parameters()):
                pt.mul_(c.target_alpha).add_((1 - c.target_alpha) * pc)
        return total / (c.critic_iters * c.critic_minibatches)

    # ------------------------------------------------------------------ use
    def policy(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic policy on raw observations (for evaluation)."""
        with torch.no_grad():
            return self.actor(self.norm(obs.float()), deterministic=True)

    def train(self, iterations: int | None = None, seconds: float | None = None, log=print, every: int = 1,
              env_steps: int | None = None, on_iteration=None) -> list:
        """Run iterations until a budget is spent (``iterations``, ``seconds`` or ``env_steps``,
        whichever comes first); returns the per-iteration records. A budget in iterations or env
        steps gives every machine the same result for the same seed; one in seconds does not.
        ``on_iteration(record)`` is called after each iteration (a progress bar, say)."""
        if iterations is None and seconds is None and env_steps is None:
            raise ValueError("give iterations, seconds or env_steps")
        t0, history = time.perf_counter(), []
        while True:
            rec = self.iteration()
            rec["time"] = time.perf_counter() - t0
            recent = self.episode_returns[-20:]
            rec["episode_return"] = sum(recent) / len(recent) if recent else math.nan
            lines = self.episode_lines[-20:]
            for k in (lines[0] if lines else {}):
                rec[f"episode/{k}"] = sum(d[k] for d in lines) / len(lines)
            history.append(rec)
            if on_iteration is not None:
                on_iteration(rec)
            if log is not None and self.iterations % every == 0:
                log(f"iter {self.iterations:4d}  steps {rec['env_steps']:8d}  actor {rec['actor_loss']:+.4f}  "
                    f"critic {rec['critic_loss']:.4f}  |g| {rec['grad_norm']:.3f}  "
                    f"ep.return {rec['episode_return']:.2f}  {rec['time']:.0f} s")
            if ((iterations is not None and len(history) >= iterations) or (seconds is not None and rec["time"] >= seconds)
                    or (env_steps is not None and rec["env_steps"] >= env_steps)):
                return history

    def state_dict(self) -> dict:
        """Plain tensors, numbers, strings, lists and dicts only, so ``torch.load(weights_only=True)``
        reads it back (the env's keyword arguments are stored as JSON)."""
        try:
            env_json = json.dumps(self.env_kwargs)
        except TypeError as exc:
            raise ValueError(f"env_kwargs must be JSON-serialisable to be saved (custom reward_terms are not): {exc}") from None
        cfg = dataclasses.asdict(self.config)
        cfg["hidden"], cfg["betas"] = list(cfg["hidden"]), list(cfg["betas"])
        return dict(format=CHECKPOINT_FORMAT, config=cfg, env_kwargs=env_json, actor=self.actor.state_dict(),
                    critic=self.critic.state_dict(), target=self.target.state_dict(), norm=self.norm.state_dict(),
                    actor_opt=self.actor_opt.state_dict(), critic_opt=self.critic_opt.state_dict(),
                    env_steps=self.env_steps, iterations=self.iterations, gen=self.gen.get_state())

    def save(self, path: str) -> None:
        """Write the checkpoint whole or not at all: to a temporary file beside ``path``, then
        moved over it, so an interrupted save leaves the previous checkpoint (issue 46)."""
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            torch.save(self.state_dict(), tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def load(cls, path: str) -> "SHAC":
        """A trainer from a :meth:`save` file, with its training env (to resume training). Read
        with ``weights_only=True`` (no code in the file runs); anything that is not such a file,
        sizes past :meth:`SHACConfig.validate`'s bounds and non-finite weights raise
        :class:`CheckpointError`. To evaluate or record, :meth:`load_policy` builds the policy alone."""
        d, config, env_kwargs = _read_checkpoint(path)
        try:
            agent = cls(config, env_kwargs)
            for name in ("actor", "critic", "target", "norm", "actor_opt", "critic_opt"):
                getattr(agent, name).load_state_dict(d[name])
            agent.env_steps, agent.iterations = _count(d, "env_steps"), _count(d, "iterations")
            agent.gen.set_state(d["gen"])
            _check_finite(agent.actor, agent.critic, agent.target, agent.norm)
        except Exception as exc:
            raise CheckpointError(f"{path} is not a usable dyn4-gym SHAC checkpoint ({_why(exc)})") from None
        return agent

    @staticmethod
    def load_policy(path: str) -> tuple["SHACPolicy", dict]:
        """``(policy, env_kwargs)`` from a :meth:`save` file: the normaliser and the actor only,
        sized from the file's env (its observation and action box) and checked against it; no
        env, critic or optimiser is built, whatever ``num_envs`` the file says."""
        from ..envs import EnvConfig, TaskCore

        d, config, env_kwargs = _read_checkpoint(path)
        try:
            core = TaskCore(EnvConfig.from_dict(env_kwargs))
            actor = _actor_of(core, config)
            norm = RunningNorm(len(core.obs_names))
            actor.load_state_dict(d["actor"])
            norm.load_state_dict(d["norm"])
            _check_finite(actor, norm)
        except Exception as exc:
            raise CheckpointError(f"{path} is not a usable dyn4-gym SHAC checkpoint ({_why(exc)})") from None
        return SHACPolicy(norm, actor).eval(), env_kwargs

    def config_json(self) -> str:
        return json.dumps(dict(shac=dataclasses.asdict(self.config), env=self.env_kwargs), indent=1, default=str)


_MAX_JSON = 1 << 20  # [characters] a checkpoint's env keyword arguments


def _read_checkpoint(path: str) -> tuple[dict, SHACConfig, dict]:
    """``(contents, config, env_kwargs)`` of a :meth:`SHAC.save` file, read without running code,
    its config validated (bounded sizes); else :class:`CheckpointError`."""
    try:
        d = torch.load(path, weights_only=True, map_location="cpu")
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path} is a directory, not a checkpoint") from None
    except Exception as exc:  # truncated, not a torch file, or objects weights_only refuses
        raise CheckpointError(f"{path} is not a dyn4-gym SHAC checkpoint ({_why(exc)})") from None
    try:
        if not isinstance(d, dict) or d.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"no {CHECKPOINT_FORMAT!r} format tag")
        cfg = dict(d["config"])
        cfg["hidden"] = tuple(cfg["hidden"])
        if "betas" in cfg:  # files from before the field keep the default
            cfg["betas"] = tuple(cfg["betas"])
        config = SHACConfig(**cfg)
        config.validate()
        if not isinstance(d["env_kwargs"], str) or len(d["env_kwargs"]) > _MAX_JSON:
            raise ValueError(f"env_kwargs must be a JSON string of at most {_MAX_JSON} characters")
        env_kwargs = strict_json(d["env_kwargs"])
        if not isinstance(env_kwargs, dict):
            raise ValueError("env_kwargs must be a JSON object")
        _count(d, "env_steps"), _count(d, "iterations")
    except Exception as exc:
        raise CheckpointError(f"{path} is not a usable dyn4-gym SHAC checkpoint ({_why(exc)})") from None
    return d, config, env_kwargs


def _count(d: dict, key: str) -> int:
    v = d[key]
    if not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63):
        raise ValueError(f"{key} must be a count, got {v!r}")
    return v


def _check_finite(*modules: nn.Module) -> None:
    for m in modules:
        for name, t in m.state_dict().items():
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise ValueError(f"non-finite values in {type(m).__name__}.{name}")
