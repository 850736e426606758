"""A long wait says what it is (issue 47, item 6): the first call of each Numba kernel in a
process is watched, and a line on stderr says the kernels are compiling if it takes long."""

import contextlib
import time

import numpy as np

from dyn4_gym import _notice
from dyn4_gym.engine import numba_task


def test_a_slow_block_says_what_it_does_and_a_quick_one_says_nothing(capsys):
    with _notice.slow_notice("slow thing", after=0.05):
        time.sleep(0.5)
    with _notice.slow_notice("slow thing", after=0.05):  # said once a process
        time.sleep(0.3)
    with _notice.slow_notice("quick thing", after=5.0):
        pass
    time.sleep(0.1)
    err = capsys.readouterr().err
    assert err.count("slow thing") == 1 and "quick thing" not in err


def test_the_first_call_of_each_kernel_is_watched_and_later_ones_are_not(monkeypatch):
    from dyn4_gym.envs.vector import Dyn4VectorEnv

    seen = []

    @contextlib.contextmanager
    def record(message, after=None):
        seen.append(message)
        yield

    monkeypatch.setattr(_notice, "slow_notice", record)
    monkeypatch.setattr(numba_task, "_CALLED", set())
    env = Dyn4VectorEnv(num_envs=2, engine="numba")
    env.reset(seed=0)
    first = len(seen)
    assert first >= 1 and set(seen) == {numba_task.COMPILING}  # reset's and observe's kernels
    env.step(np.zeros((2, 2), dtype=np.float32))
    assert len(seen) == first + 1  # the step kernel's first call
    n = len(numba_task._CALLED)
    for _ in range(3):
        env.step(np.zeros((2, 2), dtype=np.float32))
    assert len(seen) == first + 1 and len(numba_task._CALLED) == n
