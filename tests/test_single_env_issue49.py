"""Issue 49 (step 5): the single env steps on buffers bound once (NumbaEngine.step_one) and gives
exactly what the batch path gives a batch of one: observations, rewards, flags and the info dict,
on both engines, with a user's reward term (the general path) too, across resets."""

import numpy as np
import pytest

from dyn4_gym.envs import Dyn4Env, RewardTerm
from dyn4_gym.envs.config import EnvConfig
from dyn4_gym.envs.inputs import check_actions
from dyn4_gym.envs.vector import BatchRunner


def _lateral(ctx):
    return -ctx.cross_track.abs() * ctx.speed


CASES = {
    "numba": dict(),
    "numba-driver": dict(action="driver"),
    "numba-custom-term": dict(reward_terms=(RewardTerm("lateral", _lateral),), reward_weights={"lateral": 0.1}),
    "torch": dict(engine="torch", dtype="float64"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_single_env_step_equals_the_batch_step(case):
    kw = dict(CASES[case], episode_steps=40)
    env = Dyn4Env(**kw)
    ref = BatchRunner(EnvConfig.from_dict(kw), 1)
    n_action = env.core.n_action
    rng = np.random.default_rng(3)
    obs, _ = env.reset(seed=5)
    np.testing.assert_array_equal(obs, ref.reset([5])[0])
    kept, resets = [], 0
    for t in range(90):  # two resets at the episode limit
        a = rng.uniform(-1.0, 1.0, n_action)
        obs, reward, term, trunc, info = env.step(a)
        o, r, te, tr, raw = ref.step(check_actions(a, None, n_action)[None])
        np.testing.assert_array_equal(obs, o[0])
        assert obs.dtype == np.float32 and obs.shape == o[0].shape
        assert type(reward) is float and reward == float(r[0])
        assert type(term) is bool and type(trunc) is bool and (term, trunc) == (bool(te[0]), bool(tr[0]))
        assert info == ref.info_row(raw, 0)
        kept.append((obs, obs.copy()))
        if term or trunc:
            resets += 1
            obs, _ = env.reset()
            np.testing.assert_array_equal(obs, ref.reset()[0])
    assert resets >= 2
    if case.startswith("numba"):  # the bound buffers where the kernel alone steps, the batch path with users' terms
        assert (env._runner.engine._one is None) == (case == "numba-custom-term")
    # every observation handed out stays as it was (the buffers bound once are not the observation's)
    for handed, copy in kept:
        np.testing.assert_array_equal(handed, copy)


def test_a_rejected_action_leaves_the_single_env_as_it_was():
    env = Dyn4Env()
    env.reset(seed=1)
    before = env.state.copy()
    for bad in (np.array([np.nan, 0.0]), np.zeros(3), np.array(["a", "b"])):
        with pytest.raises(ValueError):
            env.step(bad)
    for name, a in vars(before).items():
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(getattr(env.state, name), a, err_msg=name)
