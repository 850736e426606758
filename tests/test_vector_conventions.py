"""Gymnasium's vector conventions on the native vector env: ``_key`` masks as Gymnasium's own
vector envs write them (compared with ``make_vec(..., "sync")`` of single envs, every autoreset
mode), and Gymnasium's vector wrappers running on it."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import dyn4_gym  # noqa: F401

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


def _compare(ours, theirs, path="info"):
    """Every key of ours is in theirs with the same mask, and the same values where it is set; theirs
    has no other keys but the single envs' reset infos (seed_key, episode)."""
    extra = set(theirs) - set(ours)
    assert extra <= {"seed_key", "_seed_key", "episode", "_episode"}, (path, extra)
    for k, v in ours.items():
        assert k in theirs, f"{path}.{k} missing from the sync env's info"
        if isinstance(v, dict):
            _compare(v, theirs[k], f"{path}.{k}")
        elif k.startswith("_"):
            assert np.array_equal(v, theirs[k]), f"{path}.{k}: {v} vs {theirs[k]}"
        elif k != "final_obs":
            m = ours[f"_{k}"]
            np.testing.assert_array_equal(np.asarray(v)[m], np.asarray(theirs[k])[m], err_msg=f"{path}.{k}")
        else:
            for a, b in zip(v, theirs[k]):
                assert (a is None and b is None) or np.array_equal(a, b), path


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_infos_and_masks_match_gymnasiums_sync_vector_env(mode):
    kw = dict(num_envs=3, episode_steps=4)
    ours = gym.make_vec("Dyn4Humvee-v1", vectorization_mode="vector_entry_point", autoreset_mode=mode, **kw)
    sync = gym.make_vec("Dyn4Humvee-v1", vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **kw)
    o1, i1 = ours.reset(seed=2)
    o2, _ = sync.reset(seed=2)
    assert np.array_equal(o1, o2) and i1["_episode"].all()
    rng = np.random.default_rng(0)
    partial = 0
    for k in range(13):
        if k == 2:  # stagger row 0, so rows finish on different steps
            mask = np.array([True, False, False])
            o1, i1 = ours.reset(options={"reset_mask": mask})
            o2, _ = sync.reset(options={"reset_mask": mask})
            assert np.array_equal(o1, o2) and np.array_equal(i1["_episode"], mask)
        a = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
        r1, r2 = ours.step(a), sync.step(a)
        for x, y in zip(r1[:4], r2[:4]):
            assert np.array_equal(x, y)
        _compare(r1[4], r2[4])
        mask = r1[4].get("_reward_terms", np.zeros(3, bool))
        partial += bool(mask.any() and not mask.all())
        if mask.any():
            assert np.array_equal(r1[4]["reward_terms"]["_progress"], mask)
    assert partial >= 2  # rows reset in a step were masked out while the others stepped


def test_gymnasium_vector_wrappers_run_on_it():
    from gymnasium.wrappers.vector import NormalizeObservation, RecordEpisodeStatistics

    env = RecordEpisodeStatistics(NormalizeObservation(gym.make_vec("Dyn4Humvee-v1", num_envs=4, episode_steps=5)))
    env.reset(seed=0)
    finished = []
    for _ in range(12):
        obs, r, te, tr, info = env.step(np.zeros((4, 2), np.float32))
        assert np.isfinite(obs).all()
        if "episode" in info:
            finished.append(info["episode"]["l"][info["_episode"]])
    assert finished and all((lengths == 5).all() for lengths in finished)
