"""The README's Python snippets run as they stand, each in a fresh namespace (a snippet that
leans on another's names fails here)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_snippets():
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("i", range(len(SNIPPETS)))
def test_each_readme_snippet_runs_on_its_own(i, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = SNIPPETS[i]
    if "drive_rollout" in code:  # 20 s at full throttle: shorten the horizon, same calls
        code = code.replace("torch.zeros(2000,", "torch.zeros(50,")
    exec(compile(code, f"README snippet {i}", "exec"), {"__name__": "readme"})
