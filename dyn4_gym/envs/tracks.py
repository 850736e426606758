"""Tracks from files (issue 47, item 5): ``course={"file": path}`` drives a centre line read from
a CSV file instead of a drawn one (docs/env.md, "A given course").

Two formats, told apart by their column count:

- the TUM race track format (``# x_m,y_m,w_tr_right_m,w_tr_left_m``; Heilmeier et al.'s
  global_racetrajectory_optimization inputs): the centre line [m] and the track's width to its
  right and left of each point [m];
- a plain centre line: ``x, y`` [m] a row.

Rows are comma-separated numbers; blank lines and lines starting with ``#`` are skipped, and a
first line that is not numbers is a header. The task's corridor has one half-width: with widths
in the file, the corridor has them point by point (``CourseConfig.widths``: the edges the
termination checks, the range finders see, the race baseline plans inside and the renderer
draws), and ``half_width``, the cross-track's scale and the start pose's bound, is the narrowest
point's narrower side. A ``half_width`` given beside the file instead makes the corridor that
wide everywhere (the file's widths unused). A closed lap is driven once, from its first point to
its last.
"""

from __future__ import annotations

import os

import numpy as np

from .._checks import ConfigError

__all__ = ["read_track", "EXAMPLE_TRACK"]

# a track made here for the examples and tests (see data/tracks/README.md)
EXAMPLE_TRACK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "tracks",
                             "example_track.csv")


def read_track(path) -> tuple[np.ndarray, np.ndarray | None]:
    """``(centre_line (N, 2), widths (N, 2) or None)`` [m] from the CSV file ``path``: the
    widths are (right, left) of each point, where the file has them. ``ConfigError`` naming the
    file and the row for anything else (a missing file, a row of another width, a value that is
    not a finite number, a negative width, fewer than two points)."""
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"course.file must be a path, got {type(path).__name__}")
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"course.file {os.fspath(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"course.file {os.fspath(path)!r} is not a text file") from None
    rows, width, first = [], None, True
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        cells = [c.strip() for c in text.split(",")]
        try:
            values = [float(c) for c in cells]
        except ValueError:
            if first:  # a header
                first = False
                continue
            raise ConfigError(f"course.file {os.fspath(path)!r} row {n}: not numbers: {text[:80]!r}") from None
        first = False
        if len(values) not in (2, 4):
            raise ConfigError(f"course.file {os.fspath(path)!r} row {n}: {len(values)} columns; a track has 4 "
                              "(x, y, width right, width left) or 2 (x, y)")
        if width is None:
            width = len(values)
        elif len(values) != width:
            raise ConfigError(f"course.file {os.fspath(path)!r} row {n}: {len(values)} columns after rows of {width}")
        if not all(np.isfinite(values)):
            raise ConfigError(f"course.file {os.fspath(path)!r} row {n}: a value is not finite: {text[:80]!r}")
        if width == 4 and min(values[2:]) < 0.0:
            raise ConfigError(f"course.file {os.fspath(path)!r} row {n}: a width is negative")
        rows.append(values)
    if len(rows) < 2:
        raise ConfigError(f"course.file {os.fspath(path)!r} holds {len(rows)} point(s); a course needs two or more")
    a = np.asarray(rows, dtype=np.float64)
    return a[:, :2], (a[:, 2:] if width == 4 else None)


def course_from_file(values: dict, path: str) -> dict:
    """A course mapping with ``file`` replaced by the ``centre_line`` it holds and, from its
    widths, the per-point ``widths`` and their least as ``half_width`` (unless the mapping gives
    a ``half_width``: then the corridor is that wide everywhere): what ``EnvConfig`` merges."""
    if "centre_line" in values or "widths" in values:
        raise ConfigError(f"{path} gives file beside centre_line or widths: give the file alone")
    line, widths = read_track(values["file"])
    out = {k: v for k, v in values.items() if k != "file"}
    out["centre_line"] = [tuple(p) for p in line.tolist()]
    if widths is not None and "half_width" not in values:
        out["half_width"] = float(widths.min())
        out["widths"] = [tuple(w) for w in widths.tolist()]
    return out
