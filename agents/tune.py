"""Sweep a trainer's config fields and seeds with Ray Tune (the ``ray`` extra): SHAC, SB3 PPO or
SAC (from configs/<trainer>.yml's settings), each trial reporting its evaluation on the
validation courses (never the held-out ones the benchmarks report), env steps, reward terms and energy books after
every chunk of training; ASHA stops the weak trials early. Local Ray by default (``ray.init()``
starts one on this machine), ``--address`` for a cluster; the results as a table and a CSV. A
rerun with the same ``--out`` and ``--name`` resumes the sweep (finished trials are kept,
unfinished ones run again).

    python agents/tune.py --trainer shac --space '{"actor_lr": [5e-4, 1e-3, 2e-3]}' --seeds 3
    python agents/tune.py --trainer ppo --space '{"learning_rate": [1e-4, 3e-4]}' --chunks 10 --chunk 4096
    python agents/tune.py --trainer sac --env-id Dyn4HumveeRace-v0 --space '{"gamma": [0.99, 0.995]}'
    python agents/tune.py --trainer ppo --env-id Dyn4HumveeEco-v1 --metric task --space '{"learning_rate": [1e-4, 3e-4]}' \
        --env-kwargs '{"schedule_margin": 0.5, "reward_weights": {"late": 0.0, "schedule": 5.0, "progress": 0.0}}'
    python agents/tune.py --trainer ppo --env-id Dyn4HumveeEco-v1 --metric task \
        --space '{"env.schedule_margin": [0.0, 1.0], "env.reward_weights.schedule": [2.0, 5.0]}' ...  # env fields
    python agents/tune.py --trainer shac --address ray://head:10001 ...   # a cluster

A ``--space`` key ``env.FIELD`` (an ``EnvConfig`` field) or ``env.reward_weights.TERM`` (one
term's weight) sweeps the trials' training env instead of the trainer; their returns then come
from different envs, so such a sweep ranks by ``--metric task``.
"""

from __future__ import annotations

import os

import numpy as np

from dyn4_gym import cli, provenance
from dyn4_gym.agents.trainers import DEFAULT_TRAINER, TRAINERS

# what ASHA ranks the trials by (higher is better), on the validation seeds
# (dyn4_gym.agents.evaluation.VALIDATION_SEEDS), never the held-out ones: the trial env's mean
# return, or the task's own metric on the id as registered (where the trials train on another
# env: eco's margins and reward weights), as a finite score (evaluation.task_score)
METRICS = {"return": "mean_return", "task": "task_score"}
# a --space key with this prefix sweeps the training env (an EnvConfig field, or
# reward_weights.TERM), not the trainer
ENV_PREFIX = "env."
# what a sweep covers without --space: each trainer's learning rate around its configs' value
# (its registry entry, dyn4_gym.agents.trainers)
DEFAULT_SPACE = {name: t.tune_space for name, t in TRAINERS.items()}
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs")


def _numbers(d: dict, prefix: str = "") -> dict:
    """The finite numeric entries of a (nested) dict, flattened to ``prefix/key``."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_numbers(v, f"{prefix}{k}/"))
        elif isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and np.isfinite(v):
            out[f"{prefix}{k}"] = float(v)
    return out


def _report(ev, task: dict | None = None) -> dict:
    """An evaluation's figures, with its per-episode reward terms and books lines; with ``task``
    (:func:`task_of`) the task's metric too: ``task_iqm`` (lower is better; inf where over a
    quarter of the courses do not count), ``task_counted`` (the share that count) and
    ``task_score`` (what ASHA ranks)."""
    out = {**ev.row(), **_numbers(ev.terms, "eval_term/"), **_numbers(ev.books, "eval_books/")}
    if task is not None:
        from dyn4_gym.agents.evaluation import task_metric, task_score
        from dyn4_gym.agents.stats import iqm

        m = task_metric(ev, task["time_budget"])
        out.update(task_iqm=iqm(m), task_counted=float(np.isfinite(m).mean()), task_score=task_score(m))
    return out


def split_space(space: dict) -> tuple[dict, dict]:
    """``space``'s trainer fields, and its env fields (``env.`` dropped)."""
    trainer = {k: v for k, v in space.items() if not k.startswith(ENV_PREFIX)}
    env = {k[len(ENV_PREFIX):]: v for k, v in space.items() if k.startswith(ENV_PREFIX)}
    return trainer, env


def check_metric(space: dict, metric: str) -> None:
    """``ValueError`` where ``space`` sweeps env fields but ``metric`` is not the task's: those
    trials' returns come from different envs and cannot rank them."""
    if split_space(space)[1] and metric != "task":
        raise ValueError("env.* fields need --metric task (their trials' returns come from different envs)")


def with_env_params(env_kwargs: dict, env_params: dict) -> dict:
    """``env_kwargs`` with a trial's env fields over them: ``reward_weights.TERM`` sets one weight
    (the others kept), any other key the field itself."""
    out = dict(env_kwargs)
    for k, v in env_params.items():
        if k.startswith("reward_weights."):
            out["reward_weights"] = {**(out.get("reward_weights") or {}), k.split(".", 1)[1]: v}
        else:
            out[k] = v
    return out


def trainable(config: dict) -> None:
    """One trial: train ``config["trainer"]`` with ``config["params"]`` and ``config["seed"]`` for
    ``chunks`` chunks, evaluating and reporting after each (the unit ASHA counts)."""
    import torch
    from ray import tune

    from dyn4_gym.agents.evaluation import VALIDATION_SEEDS, evaluate

    torch.set_num_threads(max(int(config.get("cpus", 1)), 1))  # the trial's CPUs
    env_kwargs = with_env_params(config["env_kwargs"], config.get("env_params") or {})  # the trial's env
    params, seed = dict(config["params"]), int(config["seed"])
    seeds = VALIDATION_SEEDS[: config["eval_seeds"]]  # choosing settings: never on the held-out courses
    task = config.get("task")  # the task metric: evaluate on the id as registered, not the trial env
    eval_kwargs = env_kwargs if task is None else task["env_kwargs"]
    trainer = TRAINERS[config["trainer"]]
    if trainer.kind == "plant":
        from dyn4_gym.agents import SHACConfig

        # JSON lists: tuples
        settings = SHACConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in params.items()})
    else:
        from dyn4_gym.agents.sb3_glue import parse_zoo_values

        settings = parse_zoo_values({**config["base"], **params})  # the trial's values over configs/<trainer>.yml's
    run = trainer.make_run(env_kwargs, seed, settings, compile=getattr(settings, "compile", False))
    for _ in range(config["chunks"]):
        recs = run.train_chunk(config["chunk"])
        ev = evaluate(run.policy(), eval_kwargs, seeds=seeds)
        tune.report({**_report(ev, task), "env_steps": run.env_steps, **_numbers(recs[-1] if recs else {}, "train/")})


DEFAULT_ID = "Dyn4Humvee-v1"  # the task a sweep runs on unless --env-id says otherwise


def base_config(trainer: str, env_id: str = DEFAULT_ID) -> dict:
    """SB3 trials start from configs/<trainer>.yml's settings for ``env_id`` (its section, RL Zoo
    format, unparsed: on the race, SAC's 16 gradient steps, not v1's 4); SHAC's from
    SHACConfig's defaults."""
    if TRAINERS[trainer].kind == "plant":
        return {}
    from dyn4_gym.agents.sb3_glue import load_zoo_config

    path = os.path.join(CONFIGS, f"{trainer}.yml")
    if not os.path.exists(path):
        return {}
    hp = load_zoo_config(path, env_id, parse=False)  # RL Zoo's expression strings stay strings: plain data for Ray
    hp.pop("n_timesteps", None)
    return hp


def trial_env_kwargs(env_id: str | None, env_kwargs: dict | None) -> dict:
    """The trials' env keyword arguments: ``env_id``'s registered ones (none for ``None``) with
    ``env_kwargs`` over them, the nested tables key by key (:func:`dyn4_gym.envs.ids.id_kwargs`;
    where ``gym.make(env_id, reward_weights=...)`` would replace the id's weights, and the terms
    left out would fall back to v1's defaults): ``{"reward_weights": {"schedule": 5.0}}`` changes
    one weight of the id's task, as the learning benchmark builds the learners' training envs."""
    if env_id is None:
        return dict(env_kwargs or {})
    from dyn4_gym.envs.ids import id_kwargs

    try:
        return id_kwargs(env_id, env_kwargs)
    except ValueError as exc:
        raise ValueError(f"--env-id: {exc}") from None


def task_of(env_id: str | None) -> dict:
    """The task metric's evaluation: ``env_id`` (v1 for None) as registered, and its time budget
    [s] (None: the metric is the time to finish; set: litres per 100 km arriving within it)."""
    kw = trial_env_kwargs(env_id or DEFAULT_ID, None)
    from dyn4_gym.envs import EnvConfig

    cfg = EnvConfig.from_dict({k: v for k, v in kw.items() if k != "engine"})
    return {"env_kwargs": kw, "time_budget": cfg.time_budget}


def build_space(trainer: str, space: dict, seeds: int, env_kwargs: dict, chunks: int, chunk: int, eval_seeds: int,
                cpus_per_trial: float = 1.0, env_id: str | None = None, task: dict | None = None):
    """Tune's param space: a grid over each listed value of ``space`` (trainer fields, and env
    fields under ``env.``) and over ``seeds`` seeds; PPO's and SAC's other settings from
    ``env_id``'s section of configs/<trainer>.yml (v1's for ``None``); ``task``
    (:func:`task_of`): evaluate on it with its metric."""
    from ray import tune

    for k, v in space.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"--space[{k!r}] must be a non-empty list of values")
    trainer_space, env_space = split_space(space)
    return dict(trainer=trainer, env_kwargs=env_kwargs, chunks=chunks, chunk=chunk, eval_seeds=eval_seeds,
                base=base_config(trainer, env_id or DEFAULT_ID), cpus=cpus_per_trial, task=task,
                seed=tune.grid_search(list(range(seeds))),
                params={k: tune.grid_search(v) for k, v in trainer_space.items()},
                env_params={k: tune.grid_search(v) for k, v in env_space.items()})


def run_sweep(trainer: str, space: dict, seeds: int = 2, env_kwargs: dict | None = None, chunks: int = 4,
              chunk: int | None = None, eval_seeds: int = 4, out: str = "runs/tune", name: str | None = None,
              address: str | None = None, cpus_per_trial: float = 1.0, env_id: str | None = None,
              metric: str = "return"):
    """Run (or resume) the sweep; returns its results as a pandas DataFrame (also ``results.csv``).
    ``env_id``: the registered task the trials train and are evaluated on (its keyword arguments
    under ``env_kwargs``, its section of the zoo configs); ``None``: ``env_kwargs`` over v1's
    defaults. ``metric`` (``METRICS``): ``"return"`` ranks the trials by the trial env's mean
    return; ``"task"`` evaluates on ``env_id`` as registered and ranks by its task metric
    (``task_score``; the table also gives ``task_iqm`` and ``task_counted``)."""
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    if trainer not in TRAINERS:
        raise ValueError(f"--trainer must be one of {', '.join(TRAINERS)}, got {trainer!r}")
    if metric not in METRICS:
        raise ValueError(f"--metric must be one of {sorted(METRICS)}, got {metric!r}")
    rank = METRICS[metric]
    check_metric(space, metric)
    chunk = chunk or TRAINERS[trainer].tune_chunk
    name = name or f"{trainer}_sweep"
    out = os.path.abspath(out)
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONWARNINGS": "ignore::DeprecationWarning"}})
    path = os.path.join(out, name)
    fn = tune.with_resources(trainable, {"cpu": cpus_per_trial})
    if tune.Tuner.can_restore(path):
        tuner = tune.Tuner.restore(path, trainable=fn, resume_unfinished=True, resume_errored=True)
    else:
        scheduler = ASHAScheduler(time_attr="training_iteration", max_t=chunks, grace_period=1, reduction_factor=2)
        tuner = tune.Tuner(fn, param_space=build_space(trainer, space, seeds, trial_env_kwargs(env_id, env_kwargs),
                                                        chunks, chunk, eval_seeds, cpus_per_trial, env_id,
                                                        task_of(env_id) if metric == "task" else None),
                           tune_config=tune.TuneConfig(metric=rank, mode="max", scheduler=scheduler),
                           run_config=tune.RunConfig(name=name, storage_path=out, verbose=0))
    # the machine the sweep ran from (on a local Ray, its trials' too): figures repeat on one
    # machine, not across (dyn4_gym/provenance.py)
    os.makedirs(path, exist_ok=True)
    provenance.record(os.path.join(path, provenance.FILE), sweep=name, address=address)
    results = tuner.fit()
    df = results.get_dataframe()
    keep = [c for c in df.columns if c.startswith(("config/params/", "config/env_params/")) or c in (
        "config/seed", rank, "mean_return", "task_iqm", "task_counted", "finished", "mean_speed", "energy_per_km",
        "env_steps", "training_iteration")]
    table = df[keep].rename(columns=lambda c: c.replace("config/params/", "").replace("config/env_params/", ENV_PREFIX)
                            .replace("config/", ""))
    table = table.sort_values(rank, ascending=False)
    table.to_csv(os.path.join(out, name, "results.csv"), index=False)
    return table


def check_space(trainer: str, space: dict, env_id: str | None = None, env_kwargs: dict | None = None) -> None:
    """``ValueError`` naming the key, before Ray starts: every key a field of the trainer's config
    (SHACConfig, or the SB3 algorithm's keyword arguments and RL Zoo's keys), every value one it
    takes (SHAC: its validate()); an ``env.`` key's every value one the trials' env
    (``env_kwargs``, :func:`trial_env_kwargs`) takes in its place."""
    import dataclasses
    import inspect

    from dyn4_gym.envs import ConfigError, EnvConfig

    for k, v in space.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"--space[{k!r}] must be a non-empty list of values")
    space, env_space = split_space(space)
    fields = {f.name for f in dataclasses.fields(EnvConfig)}
    for k, values in env_space.items():
        field = k.split(".", 1)[0] if k.startswith("reward_weights.") else k
        if field not in fields or k == "reward_weights":
            raise ValueError(f"--space[{ENV_PREFIX + k!r}] is not an EnvConfig field or reward_weights.TERM "
                             f"(fields: {sorted(fields)})")
        for v in values:
            try:
                EnvConfig.from_dict(with_env_params(env_kwargs or {}, {k: v}))
            except ConfigError as exc:
                raise ValueError(f"--space[{ENV_PREFIX + k!r}] = {v!r}: {exc}") from None
    if TRAINERS[trainer].kind == "plant":
        from dyn4_gym.agents import SHACConfig

        fields = {f.name for f in dataclasses.fields(SHACConfig)} - {"seed"}
        for k, values in space.items():
            if k not in fields:
                raise ValueError(f"--space[{k!r}] is not a SHACConfig field (known: {sorted(fields)})")
            for v in values:
                try:
                    SHACConfig(**{k: tuple(v) if isinstance(v, list) else v}).validate()
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"--space[{k!r}]: {exc}") from None
        return
    cls = TRAINERS[trainer].sb3_algorithm()
    known = set(inspect.signature(cls.__init__).parameters) - {"self", "env", "seed", "device", "verbose"}
    known |= set(base_config(trainer, env_id or DEFAULT_ID)) | {"n_envs", "normalize", "policy", "policy_kwargs"}
    for k in space:
        if k not in known:
            raise ValueError(f"--space[{k!r}] is not a {cls.__name__} argument or RL Zoo key (known: {sorted(known)})")


def parse_args(argv=None):
    from dyn4_gym.agents.evaluation import VALIDATION_SEEDS

    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trainer", choices=tuple(TRAINERS), default=DEFAULT_TRAINER)
    ap.add_argument("--space", type=cli.json_object, default=None,
                    help="JSON: a trainer config field -> list of values (SHACConfig fields, or SB3 keyword arguments; "
                         "env.FIELD or env.reward_weights.TERM: the training env's; default: the trainer's learning rate, "
                         f"{DEFAULT_SPACE})")
    ap.add_argument("--seeds", type=cli.int_in(1, 1000), default=2, help="seeds per point of the grid")
    ap.add_argument("--chunks", type=cli.int_in(1, 10**6), default=4, help="reports per trial (ASHA's time unit)")
    ap.add_argument("--chunk", type=cli.positive_int, default=None, help="SHAC iterations or SB3 env steps per report")
    ap.add_argument("--eval-seeds", type=cli.int_in(1, len(VALIDATION_SEEDS)), default=4,
                    help="validation courses per evaluation")
    ap.add_env_id(help="a registered dyn4_gym id (Dyn4HumveeRace-v0, say): the trials' env is its keyword arguments "
                       "with --env-kwargs over them, and PPO and SAC start from its section of configs/<trainer>.yml "
                       "(default: Dyn4Humvee-v1's section, and --env-kwargs over the env's defaults)")
    # checked over --env-id's (eco's schedule_margin needs eco's time_budget)
    ap.add_env_kwargs(help="JSON of the env's keyword arguments (over --env-id's, when given, table by table)")
    ap.add_argument("--metric", choices=tuple(METRICS), default="return",
                    help="what ASHA ranks: the trial env's mean return, or the task's metric on --env-id as registered "
                         "(time to finish; litres per 100 km within the time budget where it has one), for trials "
                         "that train on another env (--env-kwargs)")
    ap.add_output("--out", "runs/tune")
    ap.add_argument("--name", default=None, help="the sweep's name (its folder under --out; rerun it to resume)")
    ap.add_argument("--address", default=None, help="a Ray cluster's address (default: start Ray on this machine)")
    ap.add_argument("--cpus-per-trial", type=cli.float_in(0.0, 1024.0, lo_open=True), default=1.0,
                    help="CPUs (and torch threads) per trial; all of a small machine's runs one trial at a time")
    args = ap.parse_args(argv)
    if args.env_id is not None:  # a dyn4_gym id (add_env_id checked it)
        try:
            base_config(args.trainer, args.env_id)  # PPO and SAC: the zoo config has a section for it
        except Exception as exc:  # no section for it
            why = str(exc.args[0]) if exc.args else type(exc).__name__
            ap.fail("--env-id", why.splitlines()[0])
    trial = trial_env_kwargs(args.env_id, args.env_kwargs)  # the trials' env (add_env_kwargs checked it)
    if args.space is None:
        args.space = DEFAULT_SPACE[args.trainer]
    try:
        check_space(args.trainer, args.space, args.env_id, trial)
        check_metric(args.space, args.metric)
    except ValueError as exc:
        ap.fail("--space", str(exc))
    if args.name is not None and (not args.name.strip() or os.sep in args.name or args.name in (".", "..")):
        ap.fail("--name", f"must be a folder name, got {args.name!r}")
    return args


@cli.script
def main(argv=None):
    args = parse_args(argv)
    table = run_sweep(args.trainer, args.space, args.seeds, args.env_kwargs, args.chunks, args.chunk, args.eval_seeds,
                      args.out, args.name, args.address, args.cpus_per_trial, args.env_id, args.metric)
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.to_string(index=False))
    print(f"-> {os.path.join(os.path.abspath(args.out), args.name or args.trainer + '_sweep', 'results.csv')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
