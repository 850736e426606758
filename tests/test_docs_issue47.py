"""Issue 47: a README of one screen, the docs site that builds strictly, and the docs' tables that
restate code made from their source (dyn4_gym/doc_tables.py)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dyn4_gym import ID_NOTES, doc_tables
from dyn4_gym.envs.ids import env_ids
from dyn4_gym.model.task import OBS_DOC, OBS_TABLE_ALL, REWARD_TERM_TABLE, SENSOR_DOC

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", doc_tables.files(), ids=lambda p: p.name)
def test_every_generated_table_matches_its_source(path):
    """A committed table that drifted from its source fails here: ``python -m dyn4_gym.doc_tables``
    rewrites it."""
    text = path.read_text()
    assert doc_tables.fill(text) == text, f"{path.name}: a generated table is stale (python -m dyn4_gym.doc_tables)"


def test_every_table_is_somewhere_and_every_block_names_a_table():
    names = [m.group("name") for p in doc_tables.files() for m in doc_tables.BLOCK.finditer(p.read_text())]
    assert set(names) == set(doc_tables.TABLES)
    with pytest.raises(KeyError, match="no generated table"):
        doc_tables.render("nope")


def test_the_tables_cover_their_sources():
    ids = doc_tables.render("ids")
    assert all(f"`{i}`" in ids for i in env_ids()) and set(ID_NOTES) == set(env_ids())
    obs = doc_tables.render("observations")
    # every entry in order, then the sensors' families (their count is the config's)
    assert [ln.split("|")[1].strip(" `") for ln in obs.splitlines()[2:]] == [o[0] for o in OBS_TABLE_ALL] + list(SENSOR_DOC)
    assert set(OBS_DOC) == {o[0] for o in OBS_TABLE_ALL}
    terms = doc_tables.render("reward-terms")
    assert [ln.split("|")[1].strip(" `") for ln in terms.splitlines()[2:]] == [t[0] for t in REWARD_TERM_TABLE]


def test_an_id_without_a_line_is_an_error(monkeypatch):
    import dyn4_gym

    monkeypatch.setattr(dyn4_gym, "ID_NOTES", {k: v for k, v in ID_NOTES.items() if k != "Dyn4HumveeRace-v1"})
    with pytest.raises(KeyError, match="Dyn4HumveeRace-v1"):
        doc_tables.render("ids")


def test_the_results_table_is_the_summary():
    """Each row's figures are the summary's: a change of the benchmark's numbers shows here."""
    summary = json.loads((ROOT / "docs" / "learning_summary.json").read_text())
    table = doc_tables.results_table(summary)
    for key, env in (("race_v1", "Dyn4HumveeRace-v1"), ("eco_v2", "Dyn4HumveeEco-v2")):
        # the learners' counted shares, in the order the summary gives them
        lines = [ln for ln in table.splitlines() if ln.startswith(f"| `{env}` |")]
        # (a learner with checkpoints chosen on validation has a second row, its "selected")
        learners = [ln for ln in lines if ln.split(" | ")[1].split(",")[0] in ("SHAC", "PPO", "SAC")]
        assert [float(ln.split(" | ")[3].split()[0]) for ln in learners] == \
            [round(m[k]["counted"], 2) for m in summary[key]["methods"].values() for k in ("final", "selected") if k in m]
        strong = summary[key]["strong_baseline"]
        assert any(f"{strong['iqm']:.2f}" in ln and strong["name"] in ln for ln in lines)
    # a summary with another number makes another table
    changed = json.loads(json.dumps(summary))
    changed["race_v1"]["methods"]["ppo"]["final"]["counted"] = 0.99
    assert "0.99 [" in doc_tables.results_table(changed) and doc_tables.results_table(changed) != table


def test_the_readme_is_one_screen_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)
    assert blocks[0] == ("bash", 'pip install -e ".[plot]" && python -m dyn4_gym\n')
    assert blocks[1] == ("bash", 'pip install -e ".[dev]" && python -m pytest -n auto --dist loadfile\n')
    # CI runs exactly that command
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1][1].strip().replace("pip install", "python3 -m pip install --quiet").replace(
        "python -m pytest", "python3 -m pytest") in ci
    assert blocks[2][0] == "python" and "gym.make(" in blocks[2][1] and ".learn(" in blocks[2][1]
    # every docs link in it lands on a file
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).exists(), target


def test_the_docs_site_builds_strictly(tmp_path):
    """mkdocs build --strict: a broken link, a page outside the nav, a reference that does not
    resolve or a hook that fails stops it."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    home = (tmp_path / "site" / "index.html").read_text()
    assert "Dyn4HumveeRace-v1" in home and "include: README.md" not in home  # the README is the home page
    assert "dyn4_step" in (tmp_path / "site" / "reference" / "index.html").read_text()
