"""The Python snippets of the README and the docs pages run as they stand, each in a fresh
namespace (a snippet that leans on another's names fails here; a block fenced as ``py`` instead of
``python`` is a fragment of its page's recipe and is not run), and every script command line the
docs show parses."""

import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PAGES = [README, *sorted(README.parent.joinpath("docs").glob("*.md"))]
SNIPPETS = [(page.name, k, code) for page in PAGES
            for k, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))]


def test_the_readme_and_docs_have_snippets():
    assert sum(name == "README.md" for name, _, _ in SNIPPETS) >= 1
    assert len(SNIPPETS) >= 5


@pytest.mark.parametrize("page,k,code", SNIPPETS, ids=[f"{name}-{k}" for name, k, _ in SNIPPETS])
def test_each_snippet_runs_on_its_own(page, k, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if "drive_rollout" in code:  # 20 s at full throttle: shorten the horizon, same calls
        code = code.replace("torch.zeros(2000,", "torch.zeros(50,")
    exec(compile(code, f"{page} snippet {k}", "exec"), {"__name__": "readme"})


# The scripts' command lines the docs show (README.md and docs/*.md: bash blocks, a line ending
# in a backslash joined to the next, and inline code spans), each parsed by its script's own
# parse_args as a user would type it: a flag renamed or a value the script refuses fails here.
SCRIPT = r"python (?:(?:agents|benchmarks|envs)/\w+\.py|-m dyn4_gym(?:\.\w+)*)(?:\s|$)"


def _commands() -> list[tuple[str, str]]:
    out = []
    for doc in PAGES:
        text = doc.read_text()
        blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
        blocks += re.findall(r"^ {4}(python (?:[^\n]*\\\n)*[^\n]*)", text, flags=re.M)  # indented code
        lines = [ln for b in blocks for ln in b.replace("\\\n", " ").splitlines()]
        spans = [" ".join(s.split()) for s in re.findall(r"`(python [^`]+)`", text)]
        out += [(doc.name, c.strip()) for c in lines + spans if re.match(SCRIPT, c.strip())]
    return list(dict.fromkeys(out))


COMMANDS = _commands()


def test_the_docs_show_script_commands():
    scripts = {shlex.split(c)[1 + c.startswith("python -m")] for _, c in COMMANDS}
    assert {"agents/tune.py", "agents/train_sb3.py", "benchmarks/learning.py", "benchmarks/baselines.py",
            "dyn4_gym", "dyn4_gym.demo"} <= scripts


@pytest.mark.parametrize("doc,command", COMMANDS)
def test_each_documented_command_parses(doc, command, tmp_path, monkeypatch):
    argv = shlex.split(command, comments=True)[1:]  # [script, *args], or ["-m", module, *args]
    if argv[0] == "-m":  # a module of the package, or its __main__
        argv = argv[1:]
        module = importlib.import_module(argv[0])
        if hasattr(module, "__path__"):
            module = importlib.import_module(argv[0] + ".__main__")
    else:
        path = README.parent / argv[0]
        assert path.exists(), f"{doc}: {argv[0]} does not exist"
        spec = importlib.util.spec_from_file_location(f"docs_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)  # relative --out folders land here
    for flag, value in zip(argv, argv[1:]):
        if flag == "--policy" and value != "classical":  # a model file an earlier command writes
            (tmp_path / value).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / value).touch()
        if value.startswith("@"):  # a JSON file an earlier command writes (a fit's env_kwargs.json)
            (tmp_path / value[1:]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / value[1:]).write_text("{}")
    monkeypatch.setenv("DISPLAY", ":0")  # play.py's documented precondition; parsing opens no window
    try:
        module.parse_args(argv[1:])
    except SystemExit as exc:  # argparse refuses: its message is on stderr above
        pytest.fail(f"{doc}: `{command}` is refused by {argv[0]} (exit {exc.code})")
