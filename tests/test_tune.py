"""A 2-trial Ray Tune sweep on a local Ray (agents/tune.py): results, the CSV, resuming."""

import json

import numpy as np
import pytest

from dyn4_gym import provenance

pytest.importorskip("ray.tune")


@pytest.mark.slow
def test_a_two_trial_sweep_on_local_ray_reports_and_resumes(tmp_path, load_script):
    import ray

    tune = load_script("agents/tune.py")
    kw = dict(trainer="shac", space={"actor_lr": [0.001], "num_envs": [8], "horizon": [8]}, seeds=2,
              env_kwargs={"course": {"length": 80.0}, "episode_steps": 40}, chunks=2, chunk=3, eval_seeds=2,
              out=str(tmp_path), name="t")
    try:
        table = tune.run_sweep(**kw)
        assert len(table) == 2 and sorted(table["seed"]) == [0, 1]
        assert table["mean_return"].notna().all() and (table["env_steps"] > 0).all()
        csv = tmp_path / "t" / "results.csv"
        assert csv.exists() and "mean_return" in csv.read_text().splitlines()[0]
        # each trial logged the evaluation's reward terms and books
        result = next((tmp_path / "t").glob("trainable_*/result.json")).read_text().splitlines()[-1]
        rec = json.loads(result)
        assert "eval_term/progress" in rec and "eval_books/supplied" in rec and "train/actor_loss" in rec
        # the sweep names its machine (packages, CPU): figures repeat on one machine, not across
        machines = provenance.records(str(tmp_path / "t" / provenance.FILE))
        assert machines[0]["sweep"] == "t" and machines[0]["packages"]["ray"] == ray.__version__
        # a rerun resumes: the finished trials come back as they were, nothing trains again
        again = tune.run_sweep(**kw)
        assert sorted(again["mean_return"]) == sorted(table["mean_return"])
        # --metric task through Ray: ranked by the finite task_score, with the task's IQM (inf
        # where over a quarter of the courses were not finished) and counted share in the table
        # an env field in the space comes back as its own column, named as it was given
        space = {**kw["space"], "env.episode_steps": [40]}
        task = tune.run_sweep(**{**kw, "space": space, "seeds": 1, "chunks": 1, "name": "task", "metric": "task"})
        assert len(task) == 1 and {"task_score", "task_iqm", "task_counted"} <= set(task.columns)
        assert task["env.episode_steps"].tolist() == [40]
        assert 0.0 <= task["task_score"].iloc[0] < 2.0 and 0.0 <= task["task_counted"].iloc[0] <= 1.0
    finally:
        ray.shutdown()


def test_bad_spaces_are_refused(load_script):
    tune = load_script("agents/tune.py")
    with pytest.raises(ValueError, match="--space"):
        tune.build_space("shac", {"actor_lr": 0.001}, 1, {}, 1, 1, 1)
    with pytest.raises(SystemExit) as e:
        tune.main(["--trainer", "shac", "--space", "[1, 2]"])
    assert e.value.code == 2


def test_a_sweep_on_a_registered_id_starts_from_its_settings(load_script):
    """--env-id: the trials' env is the id's (its keyword arguments under --env-kwargs, key by
    key) and SB3 trials start from the id's section of the zoo config. Before, a SAC sweep on the
    race started from v1's section: 4 gradient steps a step where the race's section has 16."""
    import dyn4_gym

    tune = load_script("agents/tune.py")
    assert tune.base_config("sac")["gradient_steps"] == 4
    assert tune.base_config("sac", "Dyn4HumveeRace-v0")["gradient_steps"] == 16
    space = tune.build_space("sac", {"gamma": [0.99]}, 1, {}, 1, 1, 1, env_id="Dyn4HumveeRace-v0")
    assert space["base"]["gradient_steps"] == 16
    kw = tune.trial_env_kwargs("Dyn4HumveeRace-v0", {"episode_steps": 50})
    assert kw == {**dyn4_gym.RACE, "episode_steps": 50}
    assert tune.trial_env_kwargs(None, {"episode_steps": 50}) == {"episode_steps": 50}
    # reward weights merge term by term: one weight changed, the id's others kept (gym.make's
    # top-level merge would put v1's defaults under the terms left out)
    eco = tune.trial_env_kwargs("Dyn4HumveeEco-v1", {"reward_weights": {"schedule": 5.0, "late": 0.0}})
    assert eco["reward_weights"] == {**dyn4_gym.ECO["reward_weights"], "schedule": 5.0, "late": 0.0}
    args = tune.parse_args(["--trainer", "sac", "--env-id", "Dyn4HumveeEco-v1", "--space", '{"gamma": [0.99]}'])
    assert args.env_id == "Dyn4HumveeEco-v1" and args.env_kwargs == {}
    with pytest.raises(SystemExit):  # a key the id's env refuses, caught before Ray starts
        tune.parse_args(["--env-id", "Dyn4HumveeRace-v0", "--env-kwargs", '{"episode_steps": 0}'])
    # --env-kwargs are checked over the id's: eco's schedule margin needs eco's time budget (the
    # README's eco sweep was refused when they were checked alone)
    readme = '{"schedule_margin": 1.0, "reward_weights": {"late": 0.0, "schedule": 5.0, "progress": 0.0}}'
    args = tune.parse_args(["--trainer", "ppo", "--env-id", "Dyn4HumveeEco-v1", "--metric", "task",
                            "--env-kwargs", readme, "--space", '{"learning_rate": [0.0003]}'])
    assert tune.trial_env_kwargs(args.env_id, args.env_kwargs)["schedule_margin"] == 1.0
    with pytest.raises(SystemExit):  # a margin past the id's budget
        tune.parse_args(["--env-id", "Dyn4HumveeEco-v1", "--env-kwargs", '{"schedule_margin": 50.0}'])
    with pytest.raises(SystemExit):  # without the id, a margin has no budget
        tune.parse_args(["--env-kwargs", '{"schedule_margin": 1.0}'])


@pytest.mark.slow
def test_rllib_ppo_trains_on_the_env_with_two_env_runners(load_script):
    """Runs where ray[rllib] is installed (it pins gymnasium==1.2.2, so not in CI's environment;
    passed here in a separate venv with Ray 2.60.0 and Gymnasium 1.2.2)."""
    pytest.importorskip("ray.rllib")
    import ray

    mod = load_script("agents/train_rllib.py")
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        algo = mod.build({"course": {"length": 80.0}, "episode_steps": 60}, env_runners=2, envs_per_runner=2, batch=512)
        steps = [int(algo.train()["num_env_steps_sampled_lifetime"]) for _ in range(2)]
        assert steps[0] >= 512 and steps[1] >= 2 * 512
        algo.stop()
    finally:
        ray.shutdown()


@pytest.mark.parametrize("metric", ["task", "return"])
def test_the_task_metric_evaluates_on_the_id_as_registered(metric, monkeypatch, load_script):
    """--metric task: a trial trains on its own env (eco with 40-step episodes and a schedule
    margin, as a sweep of the learners' training env would) and is evaluated on the id as
    registered, reporting evaluation.task_metric's figures and the task_score ASHA ranks.
    --metric return evaluates on the trial env, as before."""
    import ray.tune

    import dyn4_gym.agents.evaluation as evaluation
    from dyn4_gym.agents.stats import iqm

    tune = load_script("agents/tune.py")
    task = tune.task_of("Dyn4HumveeEco-v1")
    assert task["time_budget"] == 44.0 and task["env_kwargs"]["observe_clock"] is True
    assert task["env_kwargs"]["episode_steps"] == 1200 and "schedule_margin" not in task["env_kwargs"]
    assert tune.task_of("Dyn4HumveeRace-v0")["time_budget"] is None
    reports, calls, real = [], [], evaluation.evaluate

    def spy(policy, env_kwargs, seeds):
        calls.append((dict(env_kwargs), real(policy, env_kwargs, seeds=seeds)))
        return calls[-1][1]

    monkeypatch.setattr(ray.tune, "report", reports.append)
    monkeypatch.setattr(evaluation, "evaluate", spy)
    train_kwargs = tune.trial_env_kwargs("Dyn4HumveeEco-v1", {"episode_steps": 40, "schedule_margin": 1.0})
    space = tune.build_space("shac", {}, 1, train_kwargs, 1, 1, 2, env_id="Dyn4HumveeEco-v1",
                             task=task if metric == "task" else None)
    tune.trainable({**space, "seed": 0, "params": {"num_envs": 4, "horizon": 8}})
    (rec,), ((kwargs, ev),) = reports, calls
    assert rec["mean_return"] == ev.mean_return
    if metric == "return":
        assert kwargs == train_kwargs and "task_score" not in rec
        return
    assert kwargs == task["env_kwargs"]
    m = evaluation.task_metric(ev, 44.0)
    assert rec["task_score"] == evaluation.task_score(m) and rec["task_counted"] == np.isfinite(m).mean()
    assert rec["task_iqm"] == iqm(m) or np.isinf(rec["task_iqm"]) and np.isinf(iqm(m))
    assert tune.METRICS[tune.parse_args(["--metric", "task", "--env-id", "Dyn4HumveeEco-v1"]).metric] == "task_score"


def test_env_fields_in_the_space_sweep_the_training_env(monkeypatch, load_script):
    """``env.FIELD`` and ``env.reward_weights.TERM`` keys sweep the trials' training env (the eco
    margin and weights SHAC's tuning varied), checked value by value over the id's env before Ray
    starts, and only with --metric task (the trials' returns come from different envs)."""
    import dyn4_gym
    from dyn4_gym.agents.trainers import Trainer

    tune = load_script("agents/tune.py")
    eco = ["--trainer", "ppo", "--env-id", "Dyn4HumveeEco-v1", "--metric", "task"]
    space = '{"env.schedule_margin": [0.0, 1.0], "env.reward_weights.schedule": [5.0], "learning_rate": [0.0003]}'
    assert tune.parse_args([*eco, "--space", space]).space["env.schedule_margin"] == [0.0, 1.0]
    for bad in ('{"env.schedule_margin": [1.0, 50.0]}',  # past eco's 44 s budget
                '{"env.no_such_field": [1]}', '{"env.reward_weights.no_such_term": [1.0]}',
                '{"env.reward_weights.schedule": [-1.0]}', '{"env.reward_weights": [{}]}'):
        with pytest.raises(SystemExit):
            tune.parse_args([*eco, "--space", bad])
    with pytest.raises(SystemExit):  # ranked by the trial env's return: refused
        tune.parse_args([*eco[:4], "--space", space])
    with pytest.raises(ValueError, match="--metric task"):
        tune.run_sweep("ppo", {"env.schedule_margin": [0.0]}, env_id="Dyn4HumveeEco-v1")
    # the grid: trainer fields under params, env fields (prefix dropped) under env_params
    built = tune.build_space("ppo", json.loads(space), 1, {}, 1, 1, 1, env_id="Dyn4HumveeEco-v1")
    assert set(built["params"]) == {"learning_rate"}
    assert set(built["env_params"]) == {"schedule_margin", "reward_weights.schedule"}
    # a trial trains on its env fields over the sweep's env: one weight set, the id's others kept
    base = tune.trial_env_kwargs("Dyn4HumveeEco-v1", {"reward_weights": {"late": 0.0}})
    trained = []

    class Stop(Exception):
        pass

    def fake_run(self, env_kwargs, seed, settings=None, compile=True):  # the trial's run, built: stop there
        trained.append(env_kwargs)
        raise Stop

    monkeypatch.setattr(Trainer, "make_run", fake_run)
    with pytest.raises(Stop):
        tune.trainable(dict(trainer="shac", env_kwargs=base, chunks=1, chunk=1, eval_seeds=1, seed=0, params={},
                            env_params={"schedule_margin": 0.5, "reward_weights.schedule": 2.0}))
    (kw,) = trained
    assert kw["schedule_margin"] == 0.5
    assert kw["reward_weights"] == {**dyn4_gym.ECO["reward_weights"], "late": 0.0, "schedule": 2.0}
    assert base["reward_weights"]["schedule"] == dyn4_gym.ECO["reward_weights"]["schedule"]  # not written


@pytest.mark.parametrize("trainer", ["shac", "ppo", "sac"])
def test_each_trainer_sweeps_its_own_learning_rate_by_default(trainer, load_script):
    """Without --space a sweep covers the trainer's learning rate. Before, the default was
    SHAC's actor_lr for every trainer, so `tune.py --trainer ppo` was refused at parse."""
    tune = load_script("agents/tune.py")
    args = tune.parse_args(["--trainer", trainer])
    assert args.space == tune.DEFAULT_SPACE[trainer]
    assert set(args.space) == {"actor_lr" if trainer == "shac" else "learning_rate"}
