"""Every script speaks the tasks (issue 47, item 6): ``--env-id`` on the training and evaluation
scripts, the id's keyword arguments merged table by table, a model's task read back from its
files, and evaluate.py printing the task's own metric with its intervals."""

import json
import shutil

import numpy as np
import pytest

import dyn4_gym
from dyn4_gym.agents.evaluation import EVAL_SEEDS, evaluate, task_figures
from dyn4_gym.agents.classical import PurePursuit
from dyn4_gym.envs.ids import env_ids, id_kwargs


def test_the_ids_and_their_keyword_arguments_merged_table_by_table():
    ids = env_ids()
    assert {"Dyn4Humvee-v1", "Dyn4HumveeRace-v0", "Dyn4HumveeRace-v1", "Dyn4HumveeEco-v2"} <= set(ids)
    assert all(i.startswith("Dyn4") for i in ids) and "CartPole-v1" not in ids
    # an override of one vehicle field keeps the id's grade force (gym.make would drop it)
    kw = id_kwargs("Dyn4HumveeEco-v2", {"vehicle": {"mass": 3000.0}, "episode_steps": 50})
    assert kw["vehicle"] == {"grade_force": True, "mass": 3000.0} and kw["episode_steps"] == 50
    assert kw["course"] == dyn4_gym.ECO["course"] and kw["time_budget"] == 44.0
    w = id_kwargs("Dyn4HumveeEco-v1", {"reward_weights": {"schedule": 5.0}})["reward_weights"]
    assert w == {**dyn4_gym.ECO["reward_weights"], "schedule": 5.0}
    assert id_kwargs("Dyn4HumveeRace-v0") == dyn4_gym.RACE
    with pytest.raises(ValueError, match="'CartPole-v1' is not a dyn4_gym id; the ids are Dyn4Humvee-v0"):
        id_kwargs("CartPole-v1")


def test_task_figures_give_the_tasks_metric_with_intervals():
    seeds = EVAL_SEEDS[:3]
    race = evaluate(PurePursuit.for_env(dyn4_gym.RACE), dyn4_gym.RACE, seeds=seeds)
    f = task_figures(race, None)
    assert f["metric"] == "time to finish" and f["unit"] == "s" and f["per_course"] == race.arrival.tolist()
    assert f["counted"] == 1.0 and f["ci95"][0] <= f["iqm"] <= f["ci95"][1]
    eco = evaluate(PurePursuit.for_env(dyn4_gym.ECO_V2), dyn4_gym.ECO_V2, seeds=seeds)
    g = task_figures(eco, 44.0)
    assert g["metric"] == "fuel at arrival within the budget" and g["unit"] == "L/100 km"
    in_budget = eco.arrival <= 44.0
    assert g["counted"] == in_budget.mean()
    assert np.array_equal(np.isfinite(g["per_course"]), in_budget)
    assert np.allclose(np.asarray(g["per_course"])[in_budget], eco.litres[in_budget])


def test_evaluate_takes_an_id_and_prints_its_metric(load_script, capsys, tmp_path):
    ev = load_script("agents/evaluate.py")
    ev.main(["--policy", "classical", "--env-id", "Dyn4HumveeRace-v0", "--seeds", "2", "--env-kwargs",
             '{"course": {"half_width": 5.0}}', "--out", str(tmp_path / "ev")])
    out = capsys.readouterr().out
    assert "on Dyn4HumveeRace-v0, 2 held-out courses" in out
    assert "task metric: time to finish [s]" in out and "finished         2/2 (100%" in out
    saved = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert saved["env_id"] == "Dyn4HumveeRace-v0" and saved["task"]["counted"] == 1.0
    kw = id_kwargs("Dyn4HumveeRace-v0", {"course": {"half_width": 5.0}})
    direct = task_figures(evaluate(PurePursuit.for_env(kw), kw, seeds=EVAL_SEEDS[:2]), None)
    assert saved["task"]["iqm"] == pytest.approx(direct["iqm"], rel=1e-12)
    with pytest.raises(SystemExit) as e:
        ev.main(["--policy", "classical", "--env-id", "CartPole-v1", "--out", str(tmp_path / "x")])
    assert e.value.code == 2 and "is not a dyn4_gym id" in capsys.readouterr().err


@pytest.mark.slow
def test_a_model_trained_on_an_id_is_evaluated_on_it_and_named_elsewhere(load_script, capsys, tmp_path):
    """train_sb3.py --env-id records the task in run.json; evaluate.py without --env-id drives
    that task; on another task it names both; an RL Zoo model's file name gives its task."""
    from dyn4_gym.agents.loading import load_policy

    run = tmp_path / "ppo_race"
    load_script("agents/train_sb3.py").main(["--algo", "ppo", "--env-id", "Dyn4HumveeRace-v0", "--timesteps", "100",
                                             "--eval-freq", "100000", "--out", str(run)])
    meta = json.loads((run / "run.json").read_text())
    assert meta["env_id"] == "Dyn4HumveeRace-v0" and meta["env_kwargs"] == dyn4_gym.RACE
    capsys.readouterr()
    ev = load_script("agents/evaluate.py")
    ev.main(["--policy", str(run / "model.zip"), "--seeds", "1", "--out", str(tmp_path / "ev")])
    out = capsys.readouterr().out
    assert "(trained on Dyn4HumveeRace-v0)" in out and "task metric: time to finish" in out
    with pytest.raises(SystemExit) as e:
        ev.main(["--policy", str(run / "model.zip"), "--env-id", "Dyn4Humvee-v1", "--out", str(tmp_path / "ev1")])
    err = capsys.readouterr().err.strip().splitlines()[-1]  # the lines above: the normaliser it loaded
    assert e.value.code == 2 and err.startswith("evaluate.py: error: ")
    assert "(trained on Dyn4HumveeRace-v0) does not fit this env (Dyn4Humvee-v1, action='accel': 30 observations" in err
    # RL Zoo's layout: logs/ppo/<id>_1/<id>.zip, its normaliser in the folder named after the id
    zoo = tmp_path / "logs" / "ppo" / "Dyn4HumveeRace-v0_1"
    (zoo / "Dyn4HumveeRace-v0").mkdir(parents=True)
    shutil.copy(run / "model.zip", zoo / "Dyn4HumveeRace-v0.zip")
    shutil.copy(run / "vecnormalize.pkl", zoo / "Dyn4HumveeRace-v0" / "vecnormalize.pkl")
    _, name, kw = load_policy(str(zoo / "Dyn4HumveeRace-v0.zip"))
    assert name.endswith("(trained on Dyn4HumveeRace-v0)") and kw == dyn4_gym.RACE


def test_a_run_record_naming_no_known_id_leaves_the_task_unnamed():
    from dyn4_gym.agents.loading import trained_on

    assert trained_on("runs/x/model.zip", {"env_id": "Dyn4HumveeEco-v2"}) == "Dyn4HumveeEco-v2"
    assert trained_on("runs/x/model.zip", {"env_id": "MyCar-v0"}) is None
    assert trained_on("runs/x/model.zip", {"env_id": None}) is None
    assert trained_on("logs/ppo/Dyn4HumveeRace-v1_3/Dyn4HumveeRace-v1.zip", {}) == "Dyn4HumveeRace-v1"
