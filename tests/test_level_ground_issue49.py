"""Issue 49, step 4's level-ground path: where the rough kind draws level ground everywhere
(``RoughConfig.level``: the Flat tasks'), the kernels bind ``numba_plant.level_ground`` instead of
sampling hills, patches and bumps that are not there. It must give the very numbers the rough
sampler gives on that ground: every observation, reward and flag bit for bit, across resets."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import dyn4_gym  # noqa: F401 (registers the ids)
from dyn4_gym.engine import numba_task
from dyn4_gym.engine.numba_plant import level_ground
from dyn4_gym.ground.terrain import RoughConfig


def test_level_is_exactly_no_hill_height_patch_or_bump():
    assert RoughConfig(hills_amplitude=0.0, n_patches=0, n_bumps=0).level
    assert RoughConfig(n_hills=0, n_patches=0, n_bumps=0).level
    assert not RoughConfig().level
    assert not RoughConfig(hills_amplitude=0.0, n_patches=1, n_bumps=0).level
    assert not RoughConfig(hills_amplitude=0.0, n_patches=0, n_bumps=1).level
    assert not RoughConfig(hills_amplitude=0.1, n_patches=0, n_bumps=0).level


def _run(env_id, rough: bool, rows=8, steps=150):
    env = gym.make_vec(env_id, num_envs=rows)
    task = env.runner.engine.task
    # the level builds exactly where the draw is level (the Flat task; the eco task has hills)
    assert (task.kernels is numba_task.kernels(level_ground)) == env.runner.config.ground.level
    if rough:  # the rough kind's own builds, which sample the (empty) hills, patches and bumps
        task.kernels = numba_task.kernels(None)
    out = [env.reset(seed=5)[0]]
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(steps):
        obs, rew, term, trunc, info = env.step(rng.uniform(-1.0, 1.0, env.action_space.shape).astype(np.float32))
        out += [obs, rew, term, trunc, info["books"]["tire"], info["s"]]
        ends += int(np.sum(term | trunc))
    return out, ends


@pytest.mark.parametrize("env_id", ["Dyn4HumveeFlat-v1", "Dyn4HumveeEco-v2"])
def test_level_kernels_equal_the_rough_kernels_bit_for_bit(env_id):
    level, ends = _run(env_id, rough=False)
    rough, _ = _run(env_id, rough=True)
    assert ends > 0, "no episode ended: no reset seen"
    assert len(level) == len(rough)
    for a, b in zip(level, rough):
        np.testing.assert_array_equal(a, b)
