"""The docs' tables that restate code, made from their source (issue 47): the registered ids, the
reward terms, the observation entries, the learning benchmark's results
(``docs/learning_summary.json``) and the shipped agents' figures (their records).

In a Markdown file a generated table sits between two markers,

    <!-- generated: NAME -->
    ...
    <!-- /generated: NAME -->

and is never edited by hand: the docs site's build (mkdocs_hooks.py) fills every block from its
source, a test fails when a committed block differs from what its source makes, and

    python -m dyn4_gym.doc_tables            # rewrite every block in README.md and docs/*.md

brings them up to date. ``NAME`` is one of :data:`TABLES`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

__all__ = ["TABLES", "render", "fill", "files", "ids_table", "ids_short_table", "reward_terms_table", "observation_table",
           "results_table", "pretrained_table"]

ROOT = Path(__file__).resolve().parents[1]  # the repository (the docs' tables are a checkout's, not a wheel's)
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated: (?P=name) -->)", re.S)


def _ids_rows() -> list[tuple]:
    from gymnasium.envs.registration import registry

    from . import ID_NOTES
    from .envs.ids import env_ids

    rows = []
    for env_id in env_ids():
        if env_id not in ID_NOTES:
            raise KeyError(f"{env_id} is registered without a line in dyn4_gym.ID_NOTES")
        rows.append((env_id, ID_NOTES[env_id], registry[env_id]))
    return rows


def ids_short_table() -> str:
    """Every registered id with its one line (README)."""
    lines = ["| id | task |", "|---|---|"]
    lines += [f"| `{env_id}` | {note} |" for env_id, note, _ in _ids_rows()]
    return "\n".join(lines)


def _weights(kwargs: dict) -> str:
    """The id's reward weights that differ from the built-in defaults."""
    from .model.task import DEFAULT_WEIGHTS

    w = {**DEFAULT_WEIGHTS, **(kwargs.get("reward_weights") or {})}
    changed = [f"{k} {v:g}" for k, v in w.items() if v != DEFAULT_WEIGHTS.get(k)]
    only = [f"{k} {v:g}" for k, v in w.items() if v != 0]
    if not changed:
        return "the defaults"
    # a task that names its few terms and zeroes the rest (dyn4_gym._only) reads shorter so
    return "only " + ", ".join(only) if len(only) < len(changed) else ", ".join(changed)


def ids_table() -> str:
    """Every registered id: its action, ground, grade force, episode length and reward weights
    (from the registry's keyword arguments)."""
    from . import EPISODE_STEPS

    lines = ["| id | task | action | grade force | episode steps | reward weights (besides the defaults) |",
             "|---|---|---|---|---|---|"]
    for env_id, note, spec in _ids_rows():
        kw = spec.kwargs
        grade = "on" if (kw.get("vehicle") or {}).get("grade_force") else "off"
        lines.append(f"| `{env_id}` | {note} | {kw.get('action', 'accel')} | {grade} | "
                     f"{kw.get('episode_steps', EPISODE_STEPS)} | {_weights(kw)} |")
    return "\n".join(lines)


def reward_terms_table() -> str:
    """The built-in reward terms: name, default weight, value per step (model/task.py)."""
    from .model.task import REWARD_TERM_TABLE

    lines = ["| term | default weight | value per step (unweighted) |", "|---|---|---|"]
    lines += [f"| `{name}` | {w:g} | {doc} |" for name, w, doc in REWARD_TERM_TABLE]
    return "\n".join(lines)


def observation_table() -> str:
    """Every observation entry in order: unit, scale, and which envs observe it (model/task.py)."""
    from .model.task import OBS_CLOCK, OBS_DOC, OBS_TABLE, OBS_TABLE_ALL, OBS_TABLE_DRIVER, SENSOR_DOC

    when = {o[0]: "always" for o in OBS_TABLE}
    when.update({o[0]: '`action="driver"`' for o in OBS_TABLE_DRIVER[len(OBS_TABLE):]})
    when.update({o[0]: "`observe_clock`" for o in OBS_CLOCK})
    scale_of = {"delta_max": "the car's max steer", "half_width": "the corridor's half width"}
    lines = ["| name | what | unit | scale | observed |", "|---|---|---|---|---|"]
    for name, unit, scale in OBS_TABLE_ALL:
        sc = scale_of.get(scale, f"{scale:g}" if not isinstance(scale, str) else scale)
        lines.append(f"| `{name}` | {OBS_DOC[name]} | {unit} | {sc} | {when.get(name, '`course.preview_friction`')} |")
    sensor_scale = {"max_range": "`sensors.max_range`"}
    for pattern, (unit, scale, doc) in SENSOR_DOC.items():
        sc = sensor_scale.get(scale, f"{scale:g}" if not isinstance(scale, str) else scale)
        on = "`sensors.beams`" if pattern.startswith("range") else "`sensors.patch_rows`, `patch_cols`"
        lines.append(f"| `{pattern}` | {doc} | {unit} | {sc} | {on} |")
    return "\n".join(lines)


def _ci(pair, fmt: str = ".2f") -> str:
    # an end of None or inf: the statistic is infinite there (over a quarter of the resampled courses
    # uncounted), so the interval is open on that side
    lo, hi = (("open" if v is None or not math.isfinite(v) else format(v, fmt)) for v in pair)
    return "-" if lo == hi == "open" else f"[{lo}, {hi}]"


def _iqm(fig: dict, unit: str) -> str:
    if fig["iqm"] is None or not math.isfinite(fig["iqm"]):
        return "undefined (over a quarter uncounted)"
    return f"{fig['iqm']:.2f} {unit} {_ci(fig['ci95'])}"


def results_table(summary: dict | None = None) -> str:
    """The learning benchmark's final figures on the tasks where it compares against the
    strongest classical drivers (``docs/learning_summary.json``): per task and driver, the share
    of held-out seed-courses that count (finished, or in the eco budget) with its 95 % interval,
    the IQM of the metric (uncounted courses infinitely bad) with its interval, and the paired
    gain over the strongest classical driver (positive: better)."""
    from .agents.trainers import TRAINERS

    if summary is None:
        summary = json.loads((ROOT / "docs" / "learning_summary.json").read_text())
    lines = ["| task | driver | seeds x courses | counted [95 % CI] | IQM [95 % CI] | vs the strongest classical (paired) |",
             "|---|---|---|---|---|---|"]
    for key in ("race_v1", "eco_v2", "race", "eco"):
        if key not in summary:
            continue
        t = summary[key]
        unit = t["unit"]
        strong = t["strong_baseline"]
        rows = [(strong.get("name", "strongest classical") + " (classical)", strong, None)]
        base = t["baseline"]
        if (base["iqm"], base["counted"]) != (strong["iqm"], strong["counted"]):  # the baseline is not the strongest
            rows.insert(0, ("baseline (classical)", base, None))
        if "oracle" in t and isinstance(t["oracle"], dict) and "iqm" in t["oracle"]:
            rows.append(("oracle (through the plant)", t["oracle"], None))
        for method, m in t["methods"].items():
            verdict = ((t.get("target") or {}).get("methods") or {}).get(method, {})
            name = TRAINERS[method].label if method in TRAINERS else method
            rows.append((name + (", last checkpoint" if "selected" in m else ""), m["final"], verdict.get("vs_strong")))
            if "selected" in m:  # each seed's checkpoint chosen on the validation courses
                rows.append((name + ", checkpoint chosen on validation", m["selected"],
                             verdict.get("selected", {}).get("vs_strong")))
        for name, fig, vs in rows:
            gain = ""
            if vs is not None:
                iqm_gain = ("IQM undefined" if vs["gain"] is None else
                            f"{vs['gain'] * 100:+.1f} % {_ci([None if v is None else v * 100 for v in vs['gain_ci95']], '+.1f')}")
                gain = f"{iqm_gain}; counted {vs['finish_diff']:+.2f} {_ci(vs['finish_diff_ci95'], '+.2f')}"
            lines.append(f"| `{t['env']}` | {name} | {fig['seeds']} x {fig['courses']} | "
                         f"{fig['counted']:.2f} {_ci(fig['counted_ci95'])} | {_iqm(fig, unit)} | {gain} |")
    return "\n".join(lines)


def pretrained_table() -> str:
    """The shipped agents (dyn4_gym/agents/pretrained.py) and the held-out figures in their records."""
    from .agents.pretrained import available, pretrained_record

    lines = ["| id | method | env steps | seed | counted [95 % CI] | IQM [95 % CI] |", "|---|---|---|---|---|---|"]
    for env_id, method in available():
        rec = pretrained_record(env_id, method)
        f = rec["figures"]
        lines.append(f"| `{env_id}` | {method.upper()} | {rec['env_steps']:,} | {rec['seed']} | "
                     f"{f['counted']:.2f} {_ci(f['counted_ci95'])} ({f['counts']}, {f['courses']} courses) | {_iqm(f, f['unit'])} |")
    return "\n".join(lines)


TABLES = {"ids": ids_table, "ids-short": ids_short_table, "reward-terms": reward_terms_table,
          "observations": observation_table, "results": results_table, "pretrained": pretrained_table}


def render(name: str) -> str:
    """The table ``name`` (one of :data:`TABLES`) as Markdown."""
    if name not in TABLES:
        raise KeyError(f"no generated table {name!r}; the tables are {', '.join(TABLES)}")
    return TABLES[name]()


def fill(text: str) -> str:
    """``text`` with every generated block's body made afresh from its source."""
    cache: dict = {}

    def sub(m):
        name = m.group("name")
        body = cache.setdefault(name, render(name))
        return f"{m.group(1)}{body}\n{m.group(4)}"

    return BLOCK.sub(sub, text)


def files(root: Path = ROOT) -> list[Path]:
    """The Markdown files whose blocks this module keeps: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def main(argv=None) -> int:
    """Rewrite every generated block in README.md and docs/*.md; print the files it changed."""
    changed = 0
    for path in files():
        text = path.read_text()
        new = fill(text)
        if new != text:
            path.write_text(new)
            print(f"updated {path.relative_to(ROOT)}")
            changed += 1
    print(f"{changed} file(s) updated" if changed else "every generated table is current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
