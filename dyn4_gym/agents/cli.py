"""Command-line flags generated from a config dataclass (CleanRL's ``Args`` in spirit).

Every field of the dataclass becomes a flag, ``--field-name``, typed by its default: numbers and
strings take one value, a tuple takes one or more (``--hidden 64 64``), a bool is
``--name / --no-name``, an optional number (``int | None = None``) a number or nothing. So a script's ``--help`` always lists every hyperparameter, and a new
field is a new flag without touching the script.
"""

from __future__ import annotations

import argparse
import dataclasses

__all__ = ["add_config_flags", "config_from_flags"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_config_flags(parser: argparse.ArgumentParser, cls, title: str | None = None) -> None:
    """Add one flag per field of the dataclass ``cls`` (defaults from its field defaults)."""
    group = parser.add_argument_group(title or f"{cls.__name__} (every field)")
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        doc = f.metadata.get("doc", "")
        help_ = f"{cls.__name__}.{f.name}{': ' + doc if doc else ''} (default {default!r})"
        dest, metavar = f"cfg_{f.name}", f.name.upper()
        if isinstance(default, bool):
            group.add_argument(_flag(f.name), dest=dest, action=argparse.BooleanOptionalAction, default=default, help=help_)
        elif isinstance(default, tuple):
            elem = type(default[0]) if default else str
            group.add_argument(_flag(f.name), dest=dest, nargs="+", type=elem, default=list(default), metavar=metavar, help=help_)
        elif isinstance(default, (int, float, str)):
            group.add_argument(_flag(f.name), dest=dest, type=type(default), default=default, metavar=metavar, help=help_)
        elif default is None and str(f.type).split("|")[0].strip() in ("int", "float", "str"):
            # an optional number or string ("int | None"): the flag takes that type, absent means None
            kind = {"int": int, "float": float, "str": str}[str(f.type).split("|")[0].strip()]
            group.add_argument(_flag(f.name), dest=dest, type=kind, default=None, metavar=metavar, help=help_)
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: no flag for a default of type {type(default).__name__}")


def config_from_flags(cls, args: argparse.Namespace, parser: argparse.ArgumentParser | None = None):
    """The dataclass ``cls`` built from the flags :func:`add_config_flags` added, checked by its
    ``validate()`` if it has one: with ``parser``, a bad value is the parser's error naming the
    flag (one line, exit 2)."""
    values = {}
    for f in dataclasses.fields(cls):
        v = getattr(args, f"cfg_{f.name}")
        values[f.name] = tuple(v) if isinstance(v, list) else v
    cfg = cls(**values)
    if hasattr(cfg, "validate"):
        try:
            cfg.validate()
        except ValueError as exc:
            if parser is None:
                raise
            name = next((f.name for f in dataclasses.fields(cls) if f"{cls.__name__}.{f.name} " in str(exc)), None)
            parser.error(f"argument {_flag(name) if name else '(config)'}: {exc}")
    return cfg
