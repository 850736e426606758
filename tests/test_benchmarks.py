"""benchmarks/learning.py at a tiny budget: it trains every run, writes the CSV as it goes, makes
the report and plots from the CSV, and a rerun resumes (finished runs are kept, not redone)."""

import csv
import json
import os

import pytest

from dyn4_gym import cli, provenance


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_learning_benchmark_runs_resumes_and_reports(tmp_path, capsys, load_script):
    lb = load_script("benchmarks/learning.py")
    out = tmp_path / "lb"
    args = ["--scale", "0.002", "--seeds", "1", "--tasks", "flat", "default", "--methods", "shac", "ppo",
            "--evals", "2", "--eval-seeds", "2", "--pareto-seeds", "1", "--no-compile", "--out", str(out), "--docs", ""]
    assert lb.main(args) == 0
    rows = _rows(out / "curves.csv")
    runs = {(r["task"], r["method"], r["seed"], r["energy_weight"]) for r in rows}
    # 2 tasks x 2 methods at the default energy weight, and 3 more weights x 2 methods on the default task
    # the untrained policy, then one evaluation: the first window (SHAC: 32 x 32 steps) or rollout
    # (PPO: 16 x 256) passes both points (a budget of 1,000 or 4,000 steps, halved), so the second
    # is not evaluated again
    assert len(runs) == 4 + 3 * 2 and len(rows) == 2 * len(runs)
    assert all(float(r["wall_s"]) >= 0 and float(r["time_per_km"]) > 0 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["tasks"]) == {"flat", "default"} and "reach_level" in summary["tasks"]["flat"] and "reach_90pp_level" in summary["tasks"]["flat"]
    assert len(summary["pareto"]["classical"]) == len(lb.PP_SPEEDS) and len(summary["pareto"]["learned"]) == 8
    assert (out / "learning.png").exists() and (out / "pareto.png").exists()
    printed = capsys.readouterr().out
    assert "held-out courses" in printed and "ETA" in printed
    # each run names the machine that trained it (its packages and CPU)
    machines = provenance.records(str(out / provenance.FILE))
    assert sorted(tuple(m["run"]) for m in machines) == sorted(tuple(lb.run_key(r)) for r in rows if r["env_steps"] == "0")
    import torch

    assert {m["packages"]["torch"] for m in machines} == {torch.__version__} and all(m["cpu"] for m in machines)
    # a rerun skips what is done; an unfinished run (its last row dropped) runs again from scratch
    assert lb.main(args) == 0
    assert "10 runs, 10 already done" in capsys.readouterr().out and _rows(out / "curves.csv") == rows
    kept = [r for r in rows if not (r["task"], r["method"]) == ("flat", "ppo") or r["env_steps"] == "0"]
    with open(out / "curves.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(kept)
    assert lb.main(args) == 0
    assert "10 runs, 9 already done" in capsys.readouterr().out
    again = _rows(out / "curves.csv")
    assert len(again) == len(rows) and sum(r["task"] == "flat" and r["method"] == "ppo" for r in again) == 2


@pytest.mark.slow
def test_learning_benchmark_shards_share_one_csv(tmp_path, capsys, load_script, keep_threads):
    """Two shards (``--shard 0/2`` and ``1/2``) train disjoint halves of the plan into one CSV;
    together they hold every run once, and a whole (unsharded) rerun finds them all done."""
    lb = load_script("benchmarks/learning.py")
    out = tmp_path / "lb"
    args = ["--scale", "0.001", "--seeds", "2", "--tasks", "flat", "--methods", "shac", "ppo", "--evals", "1",
            "--eval-seeds", "1", "--no-pareto", "--no-compile", "--out", str(out), "--docs", ""]
    # a shard sets this process's threads (shard_threads): keep_threads gives the later tests theirs
    assert lb.main(args + ["--shard", "0/2"]) == 0
    first = {(r["method"], r["seed"]) for r in _rows(out / "curves.csv")}
    assert lb.main(args + ["--shard", "1/2"]) == 0
    rows = _rows(out / "curves.csv")
    runs = {(r["method"], r["seed"]) for r in rows}
    assert len(first) == 2 and runs == {(m, s) for m in ("shac", "ppo") for s in ("0", "1")} and len(rows) == 8
    capsys.readouterr()
    assert lb.main(args) == 0 and "4 runs, 4 already done" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        lb.main(args + ["--shard", "2/2"])
    assert e.value.code == 2


def test_learning_benchmark_shards_take_their_share_of_the_cores(monkeypatch, load_script, keep_threads):
    """``--shard K/N`` with N > 1 bounds torch's and the kernels' threads to the cores over N
    (at least 1): unbounded, each shard ran every core's worth of threads and two SAC shards
    trained ~5x slower per step. One process, or a set ``DYN4_GYM_THREADS``, is left alone."""
    import numba
    import torch

    from dyn4_gym import threads

    lb = load_script("benchmarks/learning.py")
    cores = threads.usable_cores()
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    torch.set_num_threads(3)
    assert lb.shard_threads(1) is None and torch.get_num_threads() == 3
    want = max(1, cores // 2)
    assert lb.shard_threads(2) == want
    assert torch.get_num_threads() == want and numba.get_num_threads() == min(want, numba.config.NUMBA_NUM_THREADS)
    assert lb.shard_threads(4 * cores) == 1 and torch.get_num_threads() == 1
    monkeypatch.setenv(threads.ENV_VAR, "2")
    torch.set_num_threads(3)
    assert lb.shard_threads(2) is None and torch.get_num_threads() == 3


@pytest.mark.slow
def test_the_chrono_runs_harness_reads_the_bundled_runs_and_drives_the_plant(load_script):
    """benchmarks/chrono_runs.py (issue 22's validation against Chrono's HMMWV): the bundled runs
    line up (10 s and 15 s at 100 Hz from the origin), and on the straight acceleration run the
    M998 preset covers Chrono's distance within 10 % (measured 95.9 m against 92.0 m: the preset
    is not Chrono's, whose gear ratios and engine differ; the RMS gate waits for a Chrono preset)."""
    import numpy as np
    import torch

    cr = load_script("benchmarks/chrono_runs.py")
    from dyn4_gym.plant import HUMVEE, dyn4_params
    from dyn4_gym.plant.powertrain import HUMVEE_POWERTRAIN

    for name, seconds in (("acc", 10.0), ("steer", 15.0)):
        inputs, ref = cr.load_run(name)
        assert inputs.shape[1] == 4 and ref.shape[1] == 3
        assert ref[0].tolist() == [0.0, 0.0, 0.0] and ref[-1, 0] == pytest.approx(seconds)
        assert np.allclose(np.diff(ref[:, 0]), 0.01, atol=1e-9)
    inputs, ref = cr.load_run("acc")
    ours = cr.drive(inputs, ref[:, 0], dyn4_params(HUMVEE, dtype=torch.float64), HUMVEE_POWERTRAIN, 0.8)
    assert ours.shape == (len(ref), 2) and ours[0].tolist() == pytest.approx([0.0, 0.0], abs=1e-9)
    assert ours[-1, 0] == pytest.approx(ref[-1, 1], rel=0.10)


def test_a_torch_step_has_no_host_sync(load_script):
    """benchmarks/launches.py: the torch engine's plant step and task step launch their
    operators without one host sync (``item``, ``is_nonzero``, ``nonzero``), so a GPU's queue never
    stalls inside a step and the step can go into a CUDA graph (issue 21)."""
    import torch

    from dyn4_gym.envs.config import EnvConfig
    from dyn4_gym.envs.core import TaskCore

    lb = load_script("benchmarks/launches.py")
    for action in ("accel", "driver"):
        core = TaskCore(EnvConfig.from_dict({"dtype": "float64", "action": action}))
        st = core.new_state(torch.arange(4), torch.zeros(4, dtype=torch.long))
        a = torch.zeros(4, core.n_action, dtype=torch.float64)
        n, ops, syncs = lb.count(lambda: core.step(st, a))
        assert n > 1000 and sum(syncs.values()) == 0, (action, dict(syncs))


@pytest.mark.slow
def test_the_baselines_benchmark_tunes_on_validation_and_measures_held_out(tmp_path, load_script):
    """benchmarks/baselines.py on a tiny grid: the setting chosen on the validation courses is the
    one measured on the held-out ones, and the JSON says so."""
    bl = load_script("benchmarks/baselines.py")
    out = tmp_path / "eco.json"
    res = bl.main(["eco", "--validation", "1", "--eval", "2", "--grid", '{"speed_scale": [0.9, 1.0]}', "--out", str(out)])
    assert [t["speed_scale"] for t in res["tuning"]] == [0.9, 1.0]
    assert res["chosen"] == {"speed_scale": 1.0}  # 0.9 arrives after the 44 s budget: nothing in time
    assert res["tuning"][0]["finished"] == 0.0 and res["held_out"]["finished"] == 1.0
    assert json.loads(out.read_text())["held_out"]["speed_scale"] == 1.0
    # strict JSON: nothing in time at 0.9, so its IQM (inf) is written as null
    assert cli.strict_json(out.read_text())["tuning"][0]["iqm"] is None
    assert res["eval_seeds"] == [10_000, 10_001]


@pytest.mark.slow
def test_the_eco_plan_grid_runs_as_one_batch_and_each_setting_as_alone(tmp_path, load_script):
    """benchmarks/baselines.py eco_v2_plan: the grid's settings drive as rows of one batch, and
    each setting's figures are those of the setting run by itself (dyn4_gym.agents.eco_plan)."""
    from dyn4_gym import ECO_V2
    from dyn4_gym.agents.eco_plan import EcoPlanParams, run_eco_plan
    from dyn4_gym.agents.evaluation import VALIDATION_SEEDS

    bl = load_script("benchmarks/baselines.py")
    res = bl.main(["eco_v2_plan", "--validation", "2", "--eval", "1", "--grid", '{"margin": [0.5, 2.0], "lead": [0.5]}'])
    assert [t["margin"] for t in res["tuning"]] == [0.5, 2.0] and res["task"] == "Dyn4HumveeEco-v2"
    alone, _ = run_eco_plan(VALIDATION_SEEDS[:2], params=EcoPlanParams(margin=2.0, lead=0.5), task=ECO_V2)
    assert res["tuning"][1]["litres_per_100km"] == alone.litres_per_100km.tolist()
    assert res["tuning"][1]["arrival"] == alone.arrival.tolist()
    early, late = res["tuning"][1]["arrival"], res["tuning"][0]["arrival"]
    assert all(a < b for a, b in zip(early, late))  # a wider margin arrives earlier


@pytest.mark.slow
def test_the_learning_benchmark_at_the_limits_reports_iqm_baselines_and_targets(tmp_path, capsys, load_script,
                                                                                 monkeypatch):
    """benchmarks/learning.py on the race and eco tasks at a tiny budget: every evaluation row
    keeps its per-course metric (inf where a course does not count) on the shared grid, the
    summary has a ``race`` and an ``eco`` entry with the baseline, each method's IQM and interval,
    the targets' verdicts, and merging into --docs keeps what was there."""
    import numpy as np

    lb = load_script("benchmarks/learning.py")
    out, docs = tmp_path / "lb", tmp_path / "docs"
    docs.mkdir()
    (docs / "learning_summary.json").write_text(json.dumps({"tasks": {"default": {"kept": 1}}}))
    args = ["--scale", "0.0005", "--seeds", "1", "--tasks", "race", "eco", "--methods", "shac", "ppo",
            "--eval-seeds", "2", "--no-compile", "--out", str(out), "--docs", str(docs)]
    assert lb.main(args) == 0
    rows = _rows(out / "curves.csv")
    assert {(r["task"], r["method"]) for r in rows} == {(t, m) for t in ("race", "eco") for m in ("shac", "ppo")}
    assert all(r["energy_weight"] == "0.0" for r in rows)  # the tasks' own weights: no energy term
    # one evaluation untrained, one where the first window (SHAC: 64 or 16 x 32) or rollout (PPO: 16 x
    # 256) passed the grid's first point; the later points (up to the 100 and 1,000 step budgets)
    # were passed by it too, so they are not evaluated again
    steps = {(r["task"], r["method"]): [] for r in rows}
    for r in rows:
        steps[r["task"], r["method"]].append(int(r["env_steps"]))
    first = {("race", "shac"): 2048, ("eco", "shac"): 512}  # SHAC's window: 64 cars on the race, 16 on eco
    assert all(v == [0, first.get((t, m), 4096)] for (t, m), v in steps.items())
    for r in rows:
        v = np.array([float(x) for x in r["per_course"].split()])
        assert v.shape == (2,) and float(r["finished"]) == np.isfinite(v).mean()
        # the same evaluation on as many validation courses, what a checkpoint is chosen on
        v = np.array([float(x) for x in r["valid_per_course"].split()])
        assert v.shape == (2,) and float(r["valid_finished"]) == np.isfinite(v).mean()
    summary = cli.strict_json((docs / "learning_summary.json").read_text())  # strict: inf figures are null
    assert summary["tasks"] == {"default": {"kept": 1}}  # merged, not replaced
    for task in ("race", "eco"):
        s = summary[task]
        assert s["baseline"]["counted"] == 1.0 and s["baseline"]["ci95"][0] <= s["baseline"]["iqm"] <= s["baseline"]["ci95"][1]
        assert set(s["methods"]) == {"shac", "ppo"} and s["target"]["met"] is False  # nothing learns in 4k steps
        assert set(s["target"]["methods"]) == {"shac", "ppo"}
        # each learner also with each seed's checkpoint chosen on validation (its one trained one
        # here), with its own paired verdicts
        for m in ("shac", "ppo"):
            assert s["methods"][m]["selected"]["env_steps"] == [first.get((task, m), 4096)]
            assert {"vs_baseline", "vs_strong"} <= set(s["target"]["methods"][m]["selected"])
        assert s["target"]["best_checkpoint"] in ("last", "selected")
        assert "shac_vs_ppo" in s and s["methods"]["ppo"]["curve"][0]["env_steps"] == 0
    # both tasks report their strongest classical driver (issue 44: the racing line, the eco
    # speed plan) and every learner against both bars, paired on the same courses, with intervals
    strong, base = summary["eco"]["strong_baseline"], summary["eco"]["baseline"]
    assert strong["counted"] == 1.0 and strong["iqm"] < 0.92 * base["iqm"]  # measured 9.6 against 11.4
    assert summary["eco"]["strong_baseline"]["name"] == "eco speed plan"
    race_line, race_base = summary["race"]["strong_baseline"], summary["race"]["baseline"]
    assert race_line["name"] == "racing line" and race_line["counted"] == 1.0 and race_line["iqm"] < race_base["iqm"]
    assert race_base["cap"] == 60.0 and race_base["penalised_mean"] == pytest.approx(race_base["iqm"], rel=0.1)
    # the race's oracle through the plant (docs/race_oracle.json, benchmarks/oracle.py): never slower
    # than the racing line it starts from; every learner's and the racing line's paired gap to it;
    # performance profiles and SHAC's steps ratio with its interval (issue 44)
    oracle = summary["race"]["oracle"]
    assert oracle["counted"] == 1.0 and oracle["iqm"] <= race_line["iqm"]
    assert summary["race"]["strong_baseline"]["vs_oracle"]["gain"] <= 0.0
    assert all("vs_oracle" in v for v in summary["race"]["target"]["methods"].values())
    assert summary["race"]["target"]["oracle"]["wanted"] == -0.03 and "oracle" not in summary["eco"]
    for task in ("race", "eco"):
        prof = summary[task]["profiles"]
        assert {"shac", "ppo"} <= set(prof) and prof["reference"] == summary[task]["strong_baseline"]["name"]
        assert all(lo <= sh <= hi for sh, (lo, hi) in zip(prof["shac"]["share"], prof["shac"]["ci95"]))
        assert "steps_ratio_ci95" in summary[task]["shac_vs_ppo"]
    assert summary["race"]["profiles"]["oracle"]["share"][list(summary["race"]["profiles"]["oracle"]["tau"]).index(1.0)] == 1.0
    assert (docs / "profiles.png").exists()
    for task in ("race", "eco"):
        for v in summary[task]["target"]["methods"].values():
            for bar in ("vs_baseline", "vs_strong"):
                p = v[bar]
                assert {"gain", "gain_ci95", "finish_diff", "finish_diff_ci95", "beats"} <= set(p)
                assert ("mean_gain_ci95" in p) == (task == "race")
        assert 0.0 <= summary[task]["baseline"]["counted_ci95"][0] <= summary[task]["baseline"]["counted_ci95"][1] <= 1.0
    assert (docs / "limits.png").exists() and len(_rows(docs / "learning_curves.csv")) == len(rows)
    # the rows in --docs name the machine that trained them: one record a run, as in --out
    docs_machines = provenance.records(str(docs / provenance.FILE))
    assert sorted(tuple(m["run"]) for m in docs_machines) == sorted({lb.run_key(r) for r in rows})
    printed = capsys.readouterr().out
    assert "Dyn4HumveeRace-v0: time to finish" in printed and "L/100 km" in printed and "missed" in printed
    assert "against the eco speed plan" in printed and "against the racing line" in printed
    # a report of one task leaves the other out (and merges only its own entry into --docs, where
    # the plot of both tasks stays)
    both = (docs / "limits.png").read_bytes()
    assert lb.main(args[:5] + ["eco", "--report-only"] + args[7:]) == 0
    only = cli.strict_json((out / "summary.json").read_text())
    assert "eco" in only and "race" not in only and "tasks" not in only
    printed = capsys.readouterr().out
    assert "Dyn4HumveeRace-v0" not in printed and "limits.png kept" in printed
    assert (docs / "limits.png").read_bytes() == both and (out / "limits.png").read_bytes() != both
    assert cli.strict_json((docs / "learning_summary.json").read_text())["race"] == summary["race"]
    assert provenance.records(str(docs / provenance.FILE)) == docs_machines
    # learners train on eco with the schedule term for late and no progress (LIMIT_TRAIN_WEIGHTS),
    # and are evaluated on the task as registered; the race trains on its own reward
    train, task = lb.env_kwargs_of("eco", 0.0, "sac"), lb.env_kwargs_of("eco", 0.0)
    assert {k: v for k, v in train.items() if k not in ("reward_weights", "schedule_margin")} == {
        k: v for k, v in task.items() if k != "reward_weights"}
    assert (train["reward_weights"]["schedule"], train["reward_weights"]["late"]) == (5.0, 0.0)
    assert (task["reward_weights"]["schedule"], task["reward_weights"]["late"]) == (0.0, 1.0)
    assert all(lb.env_kwargs_of("race", 0.0, m) == lb.env_kwargs_of("race", 0.0) for m in ("shac", "ppo", "sac"))
    run = lb.make_run("shac", "eco", 0, 0.0, compile=False, budget=64)
    shac = run.agent.config
    assert (shac.pedals, shac.init_log_std, shac.num_envs) == ("symmetric", -2.0, 16)
    # the training envs on eco: the schedule's pace 0.5 s ahead of the budget (each learner's the
    # winner of its margin search); the clock and the evaluation keep the budget's
    assert run.agent.env.core.cfg.schedule_margin == 0.5 and task.get("schedule_margin", 0.0) == 0.0
    assert train["schedule_margin"] == 0.5
    made = {}
    from dyn4_gym.agents import trainers

    monkeypatch.setattr(trainers, "_SB3Run", lambda algo, hp, kw, seed: made.update({algo: kw}) or made)
    for method, t in (("ppo", "eco"), ("sac", "eco"), ("ppo", "race")):
        made.clear()
        lb.make_run(method, t, 0, 0.0)
        assert made[method] == (train if t == "eco" else lb.env_kwargs_of("race", 0.0))


def test_a_run_stopped_short_of_its_budget_is_left_out_of_the_curve(capsys, load_script):
    """An interrupted benchmark leaves a run's first rows in the CSV; the report pools finished
    seeds only (counted, the unfinished one would cut every curve at the point it stopped)."""
    lb = load_script("benchmarks/learning.py")
    budget = lb.budget_of("race", "sac")

    def row(seed, steps, t):
        return dict(task="race", method="sac", seed=seed, env_steps=steps, wall_s=float(steps) / 100,
                    per_course=" ".join(str(t + k) for k in range(4)))

    done = [row(s, n, 20.0 - n / budget - s) for s in (0, 1) for n in (0, 10_000, budget // 2, budget)]
    short = [row(2, 0, 25.0), row(2, 10_000, 24.0)]
    curve = lb.limit_curve(done + short, "race", "sac")
    assert "seeds 2 left out" in capsys.readouterr().out
    assert curve == lb.limit_curve(done, "race", "sac")
    assert curve[-1]["env_steps"] == budget and curve[-1]["seeds"] == 2 and len(curve) == 4
    assert lb.limit_curve(short, "race", "sac") == []


def test_checkpoints_are_chosen_on_the_validation_courses_only(tmp_path, load_script):
    """Per seed, the checkpoint with the highest validation finish rate, then the lowest validation
    penalised mean, then the later one; the held-out figures play no part; rows from before the
    validation columns (an old CSV) give no choice."""
    lb = load_script("benchmarks/learning.py")
    budget = lb.budget_of("race", "sac")

    def row(seed, steps, valid, held_out="30 30"):
        return dict(task="race", method="sac", seed=seed, env_steps=steps, wall_s=1.0, per_course=held_out,
                    valid_per_course=valid)

    rows = [row(0, 0, "inf inf"), row(0, 10_000, "20 inf", held_out="10 10"), row(0, budget // 2, "25 26"),
            row(0, budget, "24 inf"),
            # seed 1: both finish every validation course; the lower mean wins, and on a tie the later
            row(1, 0, "inf inf"), row(1, 10_000, "22 22"), row(1, budget // 2, "21 23"), row(1, budget, "30 30"),
            # seed 2 stopped short of its budget: left out, as from the curves
            row(2, 0, "inf inf"), row(2, 10_000, "20 20")]
    chosen = lb.selected_rows(rows, "race", "sac")
    assert {s: r["env_steps"] for s, r in chosen.items()} == {0: budget // 2, 1: budget // 2}
    rows[6]["valid_per_course"] = "22 22"  # a tie with 10k: the later checkpoint
    assert lb.selected_rows(rows, "race", "sac")[1]["env_steps"] == budget // 2
    rows[6]["valid_per_course"] = "22 22.5"
    assert lb.selected_rows(rows, "race", "sac")[1]["env_steps"] == 10_000
    # an old CSV (no validation columns) reads with them empty, and gives no choice
    path = tmp_path / "old.csv"
    old_fields = [f for f in lb.FIELDS if not f.startswith("valid_")]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=old_fields)
        w.writeheader()
        w.writerows({k: r.get(k, 0.0) for k in old_fields} | {"task": "race", "method": "sac", "seed": r["seed"],
                                                             "energy_weight": 0.0} for r in rows)
    old = lb.read_rows(str(path))
    assert all(r["valid_per_course"] == "" and r["valid_finished"] != r["valid_finished"] for r in old)
    assert lb.selected_rows(old, "race", "sac") is None


def test_the_learning_benchmark_defaults_to_ten_seeds_at_the_limits_and_five_on_v1(load_script):
    # the 10 seeds per method and task at the limits, from the default command line
    # (python benchmarks/learning.py [--tasks race eco]); --seeds still sets every task's count
    lb = load_script("benchmarks/learning.py")
    seeds = {}
    for task, method, seed, w, _ in lb.plan(lb.parse_args(["--no-pareto", "--out", "x", "--docs", ""])):
        seeds.setdefault((task, method), set()).add(seed)
    assert {task for task, _ in seeds} == set(lb.TASKS)
    for (task, method), got in seeds.items():
        assert got == set(range(10 if task in lb.LIMITS else 5)), (task, method)
    runs = lb.plan(lb.parse_args(["--seeds", "3", "--tasks", "race", "flat", "--out", "x", "--docs", ""]))
    assert {seed for _, _, seed, _, _ in runs} == {0, 1, 2} and {t for t, *_ in runs} == {"race", "flat"}


def test_provenance_records_the_machine_a_line_at_a_time(tmp_path):
    """dyn4_gym.provenance: what a figure's machine was (a seeded run repeats on one machine, not
    across machines: docs/sweeps.md), one JSON line per call, appended."""
    import importlib.metadata

    import numpy

    path = str(tmp_path / provenance.FILE)
    assert provenance.records(path) == []  # no file yet: no records
    first = provenance.record(path, run=["eco", "ppo", 0, 0.0])
    provenance.record(path, run=["eco", "ppo", 1, 0.0])
    lines = provenance.records(path)
    assert [line["run"][2] for line in lines] == [0, 1] and lines[0] == first
    assert first["packages"]["numpy"] == numpy.__version__
    assert first["packages"]["dyn4-gym"] == importlib.metadata.version("dyn4-gym")
    assert first["cores"] == os.cpu_count() and first["cpu"] and first["python"].count(".") == 2
    assert set(provenance.PACKAGES) == set(first["packages"])


def test_docs_take_the_machine_records_of_the_runs_they_take(tmp_path, load_script):
    """``--docs`` keeps each of its runs' machine record: a run reported again takes its last
    record from ``--out`` (a restarted run's rows come from its last start), a run the report does
    not carry keeps its record, and a reported run ``--out`` has no record for keeps the old one."""
    lb = load_script("benchmarks/learning.py")
    src, dst = tmp_path / "out.jsonl", tmp_path / "docs.jsonl"

    def line(run, utc):
        return json.dumps({"run": list(run), "utc": utc}) + "\n"

    a, b, c, d = ("eco", "sac", 0, 0.0), ("eco", "sac", 1, 0.0), ("race", "ppo", 0, 0.0), ("eco", "ppo", 3, 0.0)
    dst.write_text(line(a, "old") + line(b, "old") + line(d, "old"))
    src.write_text(line(a, "first start") + line(c, "new") + line(a, "restart") + line(b, "not reported"))
    lb.merge_machines(str(src), str(dst), {a, c, d})
    got = {tuple(r["run"]): r["utc"] for r in provenance.records(str(dst))}
    assert got == {a: "restart", b: "old", c: "new", d: "old"}
    assert len(dst.read_text().splitlines()) == 4  # one line a run
    lb.merge_machines(str(tmp_path / "none.jsonl"), str(dst), {a})  # an --out without records: no change
    assert {tuple(r["run"]): r["utc"] for r in provenance.records(str(dst))} == got


def test_the_benchmark_constraints_pin_the_packages_a_committed_run_trained_with():
    """benchmarks/constraints.txt pins every distribution that can move a figure
    (provenance.PACKAGES, the project aside) at the versions of a machine that trained committed
    rows (docs/machines.jsonl), so ``pip install -c`` gives a run that machine's packages."""
    root = os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(root, "benchmarks", "constraints.txt")) as fh:
        pins = dict(line.strip().split("==") for line in fh if line.strip() and not line.startswith("#"))
    assert set(pins) == set(provenance.PACKAGES) - {"dyn4-gym"}
    records = provenance.records(os.path.join(root, "docs", provenance.FILE))
    assert records  # the committed rows' machines
    # a local version label (torch's "+cpu") is the build, not the release a pin names
    releases = [{k: (v or "").split("+")[0] for k, v in r["packages"].items()} for r in records]
    assert any(all(rel[k] == v for k, v in pins.items()) for rel in releases)
