"""The one knob for threads: ``DYN4_GYM_THREADS=N`` (or :func:`set_threads`).

The package never changes the caller's thread settings on its own: an env or a trainer made in
your process runs on torch's and Numba's threads as you left them. The knob is for the scripts
(agents/, envs/, benchmarks/, ``python -m dyn4_gym``) and for your own processes:

- ``set_threads(n)`` sets torch's intra-op threads and the Numba kernels' threads to ``n``.
- The scripts call :func:`script_threads` first: ``DYN4_GYM_THREADS=N`` sets both to ``N``;
  unset, torch runs on 1 thread and the kernels on every core. One torch thread is the default
  because the scripts' networks and batches are small: on a 2-core machine beside other work a
  second torch thread costs more in waiting than it gains (docs/env.md, "Threads"), while the
  kernels' TBB threads do not spin-wait. Workers that a script starts (SubprocVecEnv, Ray)
  inherit the variable, so a node full of workers sets it once.
"""

from __future__ import annotations

import os

__all__ = ["ENV_VAR", "set_threads", "script_threads", "max_threads", "usable_cores"]

ENV_VAR = "DYN4_GYM_THREADS"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else max(1, os.cpu_count() or 1)


def max_threads() -> int:
    """The most threads the knob takes: four per core of this machine. Past it nothing is gained,
    and torch's pool asked for tens of thousands of threads crashes the process (issue 46:
    99,999 segfaulted, even under ``--help``)."""
    return 4 * max(1, os.cpu_count() or 1)


def set_threads(n: int, numba_too: bool = True) -> None:
    """torch's intra-op threads and (with ``numba_too``) the Numba kernels' to ``n`` (capped at
    Numba's pool, ``NUMBA_NUM_THREADS``)."""
    import torch

    if isinstance(n, bool) or not (isinstance(n, int) and 1 <= n <= max_threads()):
        raise ValueError(f"threads must be an int from 1 to {max_threads()} (4 per core), got {n!r}")
    torch.set_num_threads(n)
    if numba_too:
        from . import engine  # noqa: F401  (chooses the threading layer before the pool starts)
        import numba

        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def script_threads(default_torch: int | None = 1) -> int | None:
    """Apply ``DYN4_GYM_THREADS`` (a positive int) for a script; unset, torch gets
    ``default_torch`` threads (None: as it is; the benchmarks measure the machine's defaults) and
    the kernels keep every core. Returns the value set for both, or None. A bad value is a
    ``ValueError`` naming the variable."""
    raw = os.environ.get(ENV_VAR)
    if raw is None or raw.strip() == "":
        if default_torch is not None:
            set_threads(default_torch, numba_too=False)
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if not 1 <= n <= max_threads():
        raise ValueError(f"{ENV_VAR} must be an integer from 1 to {max_threads()} (4 per core), got {raw!r}")
    set_threads(n)
    return n
