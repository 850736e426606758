"""The command-line convention every script of the project follows (agents/, envs/, benchmarks/,
``python -m dyn4_gym`` and the demo).

- Every flag is checked before any work starts: a bad value, an unknown flag, a JSON that is not
  a strict JSON object, an output that cannot be written, is one line on stderr naming the flag
  (``train_diff.py: error: argument --env-steps: must be an integer >= 1, got '-5'``), exit
  status 2. Nothing has been written or trained by then.
- Errors the work itself finds in what the user gave (a config the env refuses, a checkpoint that
  does not load, a policy of the other action interface) are one line on stderr too, exit 2
  (:func:`script`). Anything else is a bug and keeps its traceback.
- Threads: every script applies ``DYN4_GYM_THREADS`` first (dyn4_gym/threads.py).
- Outputs are checked writable first (:meth:`Parser.check_output`), and JSON is written strict
  (:func:`write_json`: no ``NaN``; a non-finite figure is ``null``).

Each script has ``parse_args(argv)``, which does all the checking and nothing else (the
property tests call it with random flag values), and ``main(argv)``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import tempfile

# the errors a user's input raises and the optional-dependency check: below the env side, which
# needs them too (so envs imports no script helper; issue 49's import circle)
from ._extras import EXTRAS, MissingExtra, UsageError, require

__all__ = ["Parser", "UsageError", "MissingExtra", "EXTRAS", "require", "pretrained_method", "script", "positive_int", "nonneg_int", "positive_float", "int_in", "float_in",
           "seed", "json_object", "write_json", "write_text", "strict_json"]


def env_kwargs_of(ns) -> dict:
    """The env keyword arguments parsed flags give: ``--env-id``'s registered ones (where the
    script has the flag and it is given) with ``--env-kwargs`` over them, the nested tables key by
    key (:func:`dyn4_gym.envs.ids.id_kwargs`), else ``--env-kwargs`` alone."""
    kwargs = dict(getattr(ns, "env_kwargs", None) or {})
    if getattr(ns, "env_id", None) is None:
        return kwargs
    from .envs.ids import id_kwargs

    return id_kwargs(ns.env_id, kwargs)


def one_line(text: str) -> str:
    """``text`` on one line: whitespace runs become one space, other unprintable characters
    (a path may hold any) their escapes."""
    text = " ".join(text.split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _prog(file: str | None) -> str:
    name = os.path.basename(file or sys.argv[0])
    return "python -m dyn4_gym" if name == "__main__.py" else name


def pretrained_method(policy: str) -> str | None:
    """The method a ``--policy`` value names a shipped agent of: ``"pretrained:METHOD"`` that
    method's, ``"pretrained"`` ``""`` (the default trainer's, ``dyn4_gym.agents.trainers``); None
    for any other value (classical, a file)."""
    kind, _, method = policy.partition(":")
    return method if kind == "pretrained" else None


class Parser(argparse.ArgumentParser):
    """``argparse`` with the convention: errors are one line on stderr, exit 2. The program's
    name is the calling script's file name."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("prog", _prog(sys._getframe(1).f_globals.get("__file__")))
        super().__init__(*args, **kwargs)
        self._checks = []  # run on the parsed flags by parse_args

    def parse_args(self, args=None, namespace=None):
        """Parse, then run the checks the ``add_*`` methods registered (each exits 2 on failure)."""
        ns = super().parse_args(args, namespace)
        for check in self._checks:
            check(ns)
        return ns

    def add_env_kwargs(self, help: str = "JSON of Dyn4Humvee-v1 keyword arguments") -> None:
        """``--env-kwargs``: a strict JSON object the env takes (checked with ``EnvConfig``; over
        ``--env-id``'s, where the script has that flag and it is given)."""
        self.add_argument("--env-kwargs", type=json_object, default={}, help=help)
        self._checks.append(lambda ns: self.check_env_kwargs("--env-kwargs", env_kwargs_of(ns)))

    def add_env_id(self, help: str = "a dyn4_gym task id (its registered keyword arguments; --env-kwargs over "
                                     "them, the nested tables key by key)") -> None:
        """``--env-id``: a registered dyn4_gym id, or None. Add it before ``--env-kwargs``, whose
        check then takes the id's keyword arguments under them (:func:`env_kwargs_of`)."""
        self.add_argument("--env-id", default=None, help=help)
        self._checks.append(lambda ns: ns.env_id is None or self.check_env_id("--env-id", ns.env_id))

    def check_env_id(self, flag: str, env_id: str) -> None:
        """``env_id`` is a registered dyn4_gym id (the message lists them)."""
        from .envs.ids import env_ids

        if env_id not in env_ids():
            self.fail(flag, f"{env_id!r} is not a dyn4_gym id; the ids are {', '.join(env_ids())}")

    def add_policy(self, help: str = "'classical', 'pretrained' (the agent shipped for --env-id; 'pretrained:shac'), "
                                     "a differentiable-trainer model (.pt) or an SB3 model (.zip)") -> None:
        """``--policy``: ``classical``, ``pretrained[:METHOD]`` or a file that exists."""
        self.add_argument("--policy", default="classical", help=help)
        self._checks.append(lambda ns: ns.policy == "classical" or pretrained_method(ns.policy) is not None
                            or self.check_file("--policy", ns.policy))

    def add_output(self, flag: str, default, kind: str = "dir", help: str | None = None) -> None:
        """An output flag, checked writable (:meth:`check_output`) unless it is None."""
        self.add_argument(flag, default=default, help=help)
        dest = flag.lstrip("-").replace("-", "_")
        self._checks.append(lambda ns: getattr(ns, dest) is None or self.check_output(flag, getattr(ns, dest), kind))

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")

    def fail(self, flag: str, message: str):
        """A check after parsing that names its flag (exit 2)."""
        self.error(f"argument {flag}: {message}")

    def check_output(self, flag: str, path: str, kind: str = "dir") -> None:
        """``path`` can be made and written (a folder for ``kind="dir"``, a file for ``"file"``),
        found without creating it: its nearest existing ancestor must be a folder this process
        can write in (a file is tried there and removed)."""
        if not isinstance(path, str) or not path.strip():
            self.fail(flag, "must be a path")
        p = os.path.abspath(path)
        if os.path.exists(p):
            if kind == "dir" and not os.path.isdir(p):
                self.fail(flag, f"{path} exists and is not a folder")
            if kind == "file" and os.path.isdir(p):
                self.fail(flag, f"{path} is a folder, not a file")
            if kind == "file":
                p = os.path.dirname(p)
        anc = p if kind == "dir" else os.path.dirname(p)
        while not os.path.exists(anc):
            anc = os.path.dirname(anc)
        if not os.path.isdir(anc):
            self.fail(flag, f"{path} cannot be made: {anc} is not a folder")
        try:
            with tempfile.TemporaryFile(dir=anc):
                pass
        except OSError as exc:
            self.fail(flag, f"{path} cannot be written ({exc.strerror or exc})")

    def check_env_kwargs(self, flag: str, kwargs: dict) -> None:
        """``kwargs`` are keyword arguments the env takes (``EnvConfig.from_dict``)."""
        from .envs import ConfigError, EnvConfig

        try:
            EnvConfig.from_dict(dict(kwargs))
        except ConfigError as exc:
            self.fail(flag, str(exc))

    def check_file(self, flag: str, path: str | None) -> None:
        """``path`` (if given) is a file that exists."""
        if path is not None and not os.path.isfile(path):
            self.fail(flag, f"{path}: no such file")


def script(main=None, *, default_torch_threads: int | None = 1):
    """Wrap a script's ``main(argv)``: ``DYN4_GYM_THREADS`` is applied first (torch's threads
    default to ``default_torch_threads``: dyn4_gym/threads.py), and the users' errors
    (:class:`UsageError`, ``ConfigError``, ``CheckpointError``) become one line on stderr and exit
    status 2. ``@script`` or ``@script(default_torch_threads=None)``."""
    if main is None:
        return functools.partial(script, default_torch_threads=default_torch_threads)
    from ._checks import CheckpointError, ConfigError

    @functools.wraps(main)
    def run(argv=None):
        from .threads import script_threads

        try:
            script_threads(default_torch_threads)  # DYN4_GYM_THREADS (dyn4_gym/threads.py)
        except ValueError as exc:
            sys.stderr.write(f"{_prog(main.__globals__.get('__file__'))}: error: {exc}\n")
            raise SystemExit(2) from None
        try:
            return main(argv)
        except (UsageError, ConfigError, CheckpointError) as exc:
            prog = _prog(main.__globals__.get("__file__"))
            sys.stderr.write(f"{prog}: error: {one_line(str(exc))}\n")
            raise SystemExit(2) from None

    return run


# ------------------------------------------------------------------------------------ flag types
def _int(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return v


def int_in(lo: int, hi: int | None = None):
    """A flag type: an integer in ``[lo, hi]`` (no upper bound for ``hi=None``)."""

    def parse(text: str) -> int:
        v = _int(text)
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"must be an integer {'>= ' + str(lo) if hi is None else f'in [{lo}, {hi}]'}"
                                             f", got {text!r}")
        return v

    parse.__name__ = "integer"
    return parse


def float_in(lo: float, hi: float, lo_open: bool = False):
    """A flag type: a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""

    def parse(text: str) -> float:
        v = _float(text)
        if v < lo or v > hi or (lo_open and v == lo):
            raise argparse.ArgumentTypeError(f"must be a number in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {text!r}")
        return v

    parse.__name__ = "number"
    return parse


positive_int = int_in(1)
nonneg_int = int_in(0)
positive_float = float_in(0.0, 1e12, lo_open=True)
seed = int_in(0, 2**63 - 1)


def _no_constant(name: str):
    raise ValueError(f"{name} is not strict JSON")


def strict_json(text: str):
    """``json.loads`` that refuses ``NaN`` and ``Infinity``, and JSON nested past the parser's
    depth with a ``ValueError`` (it was a raw ``RecursionError``; issue 46)."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deep to read") from None


def json_object(text: str) -> dict:
    """A flag type: a strict JSON object, or ``@PATH``: the one in that file (a fit's
    ``env_kwargs.json``, say)."""
    if isinstance(text, str) and text.startswith("@"):
        try:
            with open(text[1:]) as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        v = strict_json(text)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"must be a JSON object: {exc}") from None
    if not isinstance(v, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {type(v).__name__}")
    return v


def write_text(path: str, text: str) -> None:
    """``text`` to ``path``, written whole or not at all (a temporary file moved over it)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_json(path: str, value, **kw) -> None:
    """Strict JSON (a non-finite float becomes ``null``), written whole or not at all."""

    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    write_text(path, json.dumps(clean(value), allow_nan=False, **kw))
