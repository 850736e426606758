"""The two engines behind the numpy faces: one interface, numpy in and out (docs/env.md, "Engines").

- :class:`TorchEngine`: the torch task core (:class:`TaskCore`), the reference; any device,
  any ground kind, ``compile=True``.
- :class:`NumbaEngine`: the whole env step in one Numba kernel (dyn4_gym.engine.numba_task),
  float64 inside; the CPU default.

``EnvConfig.engine`` picks one: ``"auto"`` (Numba on the CPU unless ``compile`` asks for torch),
``"numba"`` or ``"torch"``. Where Numba cannot run the task (a ground kind without a kernel, a
broken Numba) it falls back to torch with one warning. Both engines draw the same episodes from
the same seeds and agree to 1e-9 in float64 (tests/test_engine.py); the differentiable faces
always run on torch.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from .._checks import GroundKernelError
from ..model.books import BOOK_LINES, POWERTRAIN_LINES
from ..model.packed import PK, SC
from ..model.task import FLAG, FLAG_COLUMNS, INFO, INFO_COLUMNS, TERM_ORDER
from .core import TaskCore, TaskState
from .inputs import to_numpy_info
from .rewards import evaluate_term

__all__ = ["TorchEngine", "NumbaEngine", "make_engine", "ENGINES"]

ENGINES = ("auto", "numba", "torch")


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def step_one(engine, state, action: np.ndarray):
    """One row's step for the single env: ``action (n_action,)``, checked by the caller ->
    ``(state, obs (n_obs,) float32, reward, terminated, truncated, info)``, the scalars as Python values
    and ``info`` one row's dict (the engine's ``info_row``). The general path: the engine's batch
    ``step`` on a batch of one (the Numba engine binds its buffers instead, NumbaEngine.step_one)."""
    state_, obs, reward, term, trunc, raw = engine.step(state, action[None])
    return state_, obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), engine.info_row(raw, 0)


def _nested_np(info: dict) -> dict:
    return {k: _nested_np(v) if isinstance(v, dict) else (_np(v) if isinstance(v, torch.Tensor) else v)
            for k, v in info.items()}


class TorchEngine:
    """The torch task core behind a numpy interface; states are :class:`TaskState`."""

    name = "torch"

    def __init__(self, core: TaskCore):
        self.core = core
        self._step = core.step_fn()

    def __getstate__(self):
        return {"core": self.core}  # a compiled step does not pickle; rebuilt on load

    def set_episode_steps(self, steps: int) -> None:
        """BatchRunner.set_episode_steps: the step reads the limit from the core's config."""

    def __setstate__(self, d):
        self.__init__(d["core"])

    def new_state(self, keys: np.ndarray, episodes: np.ndarray) -> TaskState:
        return self.core.new_state(torch.as_tensor(keys), torch.as_tensor(episodes))

    def reset_rows(self, state: TaskState, mask: np.ndarray, keys: np.ndarray, episodes: np.ndarray) -> TaskState:
        dev = self.core.device
        return self.core.reset_rows(state, torch.as_tensor(mask, device=dev), torch.as_tensor(keys, device=dev),
                                    torch.as_tensor(episodes, device=dev))

    def observe(self, state: TaskState, rows: np.ndarray | None = None) -> np.ndarray:
        obs = _np(self.core.observe(state)).astype(np.float32)
        return obs if rows is None else obs[rows]

    def step(self, state: TaskState, actions: np.ndarray, active: np.ndarray | None = None):
        """``(state, obs, reward, terminated, truncated, info)``, numpy; rows not ``active`` keep
        their state and get zeros (the caller resets them)."""
        B = state.batch_size
        if np.shape(actions) != (B, self.core.n_action) or (active is not None and np.shape(active) != (B,)):
            # clamp would broadcast a (B, 1) action into both columns
            raise ValueError(f"step: actions must have shape {(B, self.core.n_action)} and active {(B,)}, "
                             f"got {np.shape(actions)} and {np.shape(active)}")
        act = torch.as_tensor(actions, dtype=self.core.dtype, device=self.core.device)
        with torch.no_grad():
            new, obs, reward, term, trunc, info = self._step(state, act)
            if active is not None and not active.all():
                keep = torch.as_tensor(active, device=self.core.device)
                new = self.core.select(keep, new, state)
                reward, term, trunc = torch.where(keep, reward, 0.0), term & keep, trunc & keep
                info = _mask_info(info, keep)
        return (new, _np(obs).astype(np.float32), _np(reward).astype(np.float64), _np(term), _np(trunc),
                _nested_np(info))

    def step_one(self, state: TaskState, action: np.ndarray):
        """The single env's step (:func:`step_one`)."""
        return step_one(self, state, action)

    @staticmethod
    def info(raw: dict) -> dict:
        """A step's info as a dict of arrays (one entry per row)."""
        return raw

    @staticmethod
    def info_row(raw: dict, row: int) -> dict:
        """A step's info for one row, as Python scalars."""
        return to_numpy_info(raw, row)

    @staticmethod
    def episodes(state: TaskState) -> np.ndarray:
        return _np(state.episode).copy()

    @staticmethod
    def task_state(state: TaskState) -> TaskState:
        return state


def _mask_info(info: dict, keep: torch.Tensor) -> dict:
    """Zero the rows not in ``keep`` (nested dicts of tensors)."""
    return {k: _mask_info(v, keep) if isinstance(v, dict) else torch.where(keep, v, torch.zeros_like(v))
            for k, v in info.items()}


# the NumbaState fields a kernel step writes (the terrain and the course stay as the reset drew them)
_STEPPED = ("x", "idx", "s", "t", "prev_action", "pt")


class NumbaEngine:
    """The Numba kernels behind the same interface; states are :class:`NumbaState`, stepped in place.

    Reward terms that are not the built-ins (registered or passed in ``reward_terms``) run in
    torch on the step's context after the kernel: measured here, one such term takes the single
    env from 13.5k to 4.3k steps/s (about 160 us per step, mostly building the torch context;
    ``benchmarks/env.py --custom-term``).
    """

    name = "numba"

    def __init__(self, core: TaskCore):
        from ..engine import numba_task as nt  # numba is imported here, never at package import
        from .numba_setup import NumbaTask

        self.core, self._nt = core, nt
        self.task = NumbaTask(core)
        # the packed info's columns by name (model.task.INFO; names repeat between the terms and
        # the books, "damper": one map each)
        self._terms = {n: INFO.TERMS + j for j, n in enumerate(TERM_ORDER)}
        # the books' column blocks: the plant's lines, then the powertrain's (action="driver")
        self._book_blocks = ((BOOK_LINES, int(INFO.BOOKS)),) + (((POWERTRAIN_LINES, int(INFO.PT_LINES)),)
                                                               if core.driver else ())
        self._books = {n: j + k for names, j in self._book_blocks for k, n in enumerate(names)}
        # info_row's lookups, in the info dict's order (a custom term's column is unused: it comes from torch)
        self._row_terms = [(n, self._terms.get(n, -1)) for n in core.terms]
        # the single env's info: contiguous column blocks zipped with their names, ints for flags
        self._builtin_terms = tuple(core.terms) == TERM_ORDER
        self._cols_row = tuple(int(c) for c in (INFO.PROGRESS, INFO.DISTANCE, INFO.S, INFO.CROSS_TRACK))
        self._flags_row = tuple(int(c) for c in (FLAG.SUCCESS, FLAG.OUT_OF_CORRIDOR, FLAG.ROLLOVER, FLAG.NONFINITE))
        self._all_active = {}  # batch size -> an all-True mask (not allocated per step)
        self._one = None  # the single env's bound buffers (step_one)

    def __getstate__(self):
        return {"core": self.core}  # the kernels are the module's; rebuilt on load

    def __setstate__(self, d):
        self.__init__(d["core"])

    def set_episode_steps(self, steps: int) -> None:
        """BatchRunner.set_episode_steps: the kernel reads the limit from the packed constants."""
        self.task.step_consts[SC.EPISODE_STEPS] = steps

    def new_state(self, keys: np.ndarray, episodes: np.ndarray):
        st = self.task.empty_state(len(keys))
        self.task.reset(st, np.arange(len(keys)), keys, episodes)
        return st

    def reset_rows(self, state, mask: np.ndarray, keys: np.ndarray, episodes: np.ndarray):
        rows = np.flatnonzero(mask)
        state.key[:], state.episode[:] = keys, episodes
        self.task.reset(state, rows, np.asarray(keys)[rows], np.asarray(episodes)[rows])
        return state

    def observe(self, state, rows: np.ndarray | None = None) -> np.ndarray:
        try:
            return self._nt.observe(self.task, state, rows)
        except Exception as exc:
            if self.task.user_kind is None:
                raise
            raise self._ground_error(exc) from exc

    def _ground_error(self, exc: Exception) -> GroundKernelError:
        """A kernel's failure under a user's terrain kind, named (issue 46): the kind's sampler
        raised, returned a non-finite value or did not compile (a Numba typing error)."""
        text = str(exc).strip()
        msg = text.splitlines()[0][:300] if text else ""
        return GroundKernelError(f"the terrain kind {self.task.user_kind!r}'s Numba ground (GroundKernel.sample) failed: "
                            f"{type(exc).__name__}: {msg}; the env's state is as it was before this call")

    def step(self, state, actions: np.ndarray, active: np.ndarray | None = None):
        B = state.batch_size
        if active is None:
            active = self._all_active.get(B)
            if active is None:
                active = self._all_active[B] = np.ones(B, dtype=np.bool_)
        else:
            active = np.ascontiguousarray(active, dtype=np.bool_)
        actions = np.ascontiguousarray(actions, dtype=np.float64)
        if not self.task.custom and self.task.user_kind is None:
            obs, reward, info, flags = self._nt.step(self.task, state, actions, active)
            return state, obs, reward, flags[:, 0], flags[:, 1], (info, flags, {})
        # the kernel steps the state in place and the users' terms run after it: keep what it
        # changes, so a term that raises, or a user's ground that fails in the kernel, leaves
        # the env as it was (as on the torch engine)
        before = {f: getattr(state, f).copy() for f in _STEPPED}
        try:
            try:
                obs, reward, info, flags = self._nt.step(self.task, state, actions, active)
            except Exception as exc:
                if self.task.user_kind is None:
                    raise
                raise self._ground_error(exc) from exc
            extra = self._custom_terms(state, before, info, flags, reward, active) if self.task.custom else {}
        except BaseException:
            for f, a in before.items():
                getattr(state, f)[...] = a
            raise
        return state, obs, reward, flags[:, 0], flags[:, 1], (info, flags, extra)

    def step_one(self, state, action: np.ndarray):
        """The single env's step (``Dyn4Env.step``; :func:`step_one`'s contract) on buffers bound
        once, PufferLib-style: one row, ``action (n_action,)`` float64 as ``check_actions`` returns
        it, the kernel called with no shape checks or output allocations but the observation's
        (the caller keeps it); the reward, flags and info leave as Python values, so the buffers
        are free again when it returns. Users' terms or a user's ground take the general path."""
        if self.task.custom or self.task.user_kind is not None or state.batch_size != 1:
            return step_one(self, state, action)
        if self._one is None:
            self._one = (np.ones(1, dtype=np.bool_), np.empty(1), np.empty((1, len(INFO_COLUMNS))),
                         np.empty((1, len(FLAG_COLUMNS)), dtype=np.bool_))
        active, reward, info, flags = self._one
        obs = np.zeros((1, self.task.n_obs), dtype=np.float32)
        self._nt.step_bound(self.task, state, action.reshape(1, -1), active, obs, reward, info, flags)
        return (state, obs[0], float(reward[0]), bool(flags[0, FLAG.TERMINATED]), bool(flags[0, FLAG.TRUNCATED]),
                self.info_row((info, flags, {}), 0))

    def info(self, raw) -> dict:
        """One step's packed info as the faces' dict of arrays (``info["reward_terms"]`` ...)."""
        info, flags, extra = raw
        return self._unpack(lambda j: info[:, j], lambda j: flags[:, j], extra)

    def info_row(self, raw, row: int) -> dict:
        """One step's packed info for ``row``, as Python scalars (the single env's info): the same
        dict as :meth:`info`'s row, built from one list per step (a single env's every step)."""
        info, flags, extra = raw
        v, f = info[row].tolist(), flags[row].tolist()
        if extra:
            terms = {n: float(extra[n][row]) if n in extra else v[j] for n, j in self._row_terms}
        elif self._builtin_terms:
            terms = dict(zip(TERM_ORDER, v))  # the terms are the first columns, in this order
        else:
            terms = {n: v[j] for n, j in self._row_terms}
        books = {}
        for names, j in self._book_blocks:
            books.update(zip(names, v[j:j + len(names)]))
        p, d, s, e = self._cols_row
        fs, fo, fr, fn = self._flags_row
        return {"reward_terms": terms, "books": books, "success": f[fs], "out_of_corridor": f[fo],
                "rollover": f[fr], "nonfinite": f[fn], "progress": v[p], "distance": v[d], "s": v[s],
                "cross_track": v[e]}

    def _unpack(self, col, flag, extra: dict) -> dict:
        terms = {n: extra[n] if n in extra else col(self._terms[n]) for n in self.core.terms}
        return dict(reward_terms=terms, books={n: col(j) for n, j in self._books.items()}, success=flag(FLAG.SUCCESS),
                    out_of_corridor=flag(FLAG.OUT_OF_CORRIDOR), rollover=flag(FLAG.ROLLOVER),
                    nonfinite=flag(FLAG.NONFINITE), progress=col(INFO.PROGRESS), distance=col(INFO.DISTANCE),
                    s=col(INFO.S), cross_track=col(INFO.CROSS_TRACK))

    def _custom_terms(self, st, before, info, flags, reward, active) -> dict:
        """The non-built-in terms, in torch on the step's context (``before``: the stepped fields
        at the step's start); updates ``reward`` / ``info`` / ``flags`` in place with the
        non-finite guard, as TaskCore.step does."""
        core = self.core
        prev = before["prev_action"]
        t = torch.from_numpy
        books = {n: t(info[:, j]) for n, j in self._books.items()}
        failed = flags[:, FLAG.OUT_OF_CORRIDOR] | flags[:, FLAG.ROLLOVER] | flags[:, FLAG.NONFINITE]
        ctx = core.context(x=t(st.x), progress=t(info[:, INFO.PROGRESS]), target_speed=t(st.target_speed),
                           cross_track=t(info[:, INFO.CROSS_TRACK]), heading_error=t(info[:, INFO.HEADING_ERROR]),
                           books=books, weight=t(st.P[:, PK.M] * st.P[:, PK.G]),  # each row's m g
                           action=t(st.prev_action), prev_action=t(prev), failed=t(failed),
                           success=t(flags[:, FLAG.SUCCESS]), t=t(st.t),  # st.t already counts this step
                           s=t(info[:, INFO.S]), s_start=t(before["s"]))
        B = st.batch_size
        with torch.no_grad():
            extra = {n: _np(evaluate_term(n, term, ctx, B, torch.float64)) for n, term in self.task.custom.items()}
        was_bad = flags[:, FLAG.NONFINITE] | ~active
        total = reward + sum(core.weights[n] * v for n, v in extra.items())
        bad = ~was_bad & ~np.isfinite(total)
        reward[:] = np.where(was_bad, reward, total)
        for n in extra:
            extra[n] = np.where(was_bad | bad, 0.0, extra[n])
        # the kernel's own non-finite guard on the rows the users' terms made non-finite
        self._nt.guard_rows(np.flatnonzero(bad), info, flags, core.weights["termination"], reward)
        if "termination" in extra:
            extra["termination"] = np.where(bad, -1.0, extra["termination"])
        return extra

    @staticmethod
    def episodes(state) -> np.ndarray:
        return state.episode.copy()

    def task_state(self, state) -> TaskState:
        """The state as a torch :class:`TaskState` sharing memory (for rendering and inspection)."""
        from ..engine.numba_plant import unpack_params

        t = torch.from_numpy
        return TaskState(x=t(state.x), terrain=self.task.kernel.unpack(state.terrain), course_xy=t(state.course_xy),
                         course_heading=t(state.course_heading), idx=t(state.idx), s=t(state.s), t=t(state.t),
                         prev_action=t(state.prev_action), target_speed=t(state.target_speed), key=t(state.key),
                         episode=t(state.episode), pt=t(state.pt),
                         p=unpack_params(state.P, self.core.p) if self.core.ranges else None)


def make_engine(core: TaskCore):
    """The engine ``core.cfg.engine`` asks for (see the module docstring)."""
    cfg = core.cfg
    if cfg.engine == "torch" or (cfg.engine == "auto" and (cfg.compile or core.device.type != "cpu")):
        return TorchEngine(core)
    try:
        return NumbaEngine(core)
    except (ValueError, ImportError) as exc:
        warnings.warn(f"the numba engine cannot run this task ({exc}); using the torch engine", RuntimeWarning,
                      stacklevel=3)
        return TorchEngine(core)
