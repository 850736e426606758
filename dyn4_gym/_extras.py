"""The errors of what a user gives a command, and the check for an optional dependency
(``require``): a layer below the env side, which needs them as much as the scripts do
(``dyn4_gym.cli`` re-exports them; the scripts' error handling is there)."""

from __future__ import annotations

import importlib

__all__ = ["UsageError", "MissingExtra", "EXTRAS", "require"]


class UsageError(ValueError):
    """What a user gave that the work cannot take (one line, exit 2, through :func:`dyn4_gym.cli.script`)."""


class MissingExtra(UsageError, ImportError):
    """An optional dependency a command needs is not installed: one line naming the package
    extra that brings it (exit 2 through :func:`dyn4_gym.cli.script`; an ``ImportError`` for library code)."""


# the optional modules the package's commands import, and the extra (pyproject.toml's
# [project.optional-dependencies]) that installs each
EXTRAS = {"matplotlib": "plot", "pygame": "render", "moviepy": "video", "yaml": "sb3", "stable_baselines3": "sb3",
          "ray": "ray"}


def require(module: str, purpose: str):
    """Import ``module`` (one of :data:`EXTRAS`' keys, or a submodule of one) for ``purpose`` (what
    needs it, for the message), or raise :class:`MissingExtra` naming the extra to install. Called
    where a command starts, so a missing extra stops it at once, not after minutes of work."""
    top = module.split(".")[0]
    if top not in EXTRAS:
        raise KeyError(f"no extra installs {top!r}; known: {', '.join(EXTRAS)}")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(f"{purpose} needs {top}, which is not installed ({exc}): "
                           f"pip install \"dyn4-gym[{EXTRAS[top]}]\"") from None
