"""The energy books' lines, in order (docs/plant.md, "The books"; docs/env.md, "Energy").

The plant's lines are the fields of :class:`dyn4_gym.plant.energy.Books`, the powertrain's the
fields of :class:`dyn4_gym.plant.powertrain.PowertrainBooks`; both dataclasses are checked
against these tuples when they are defined, and the kernels write their lines by these names.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["BOOK_LINES", "BOOK", "POWERTRAIN_LINES", "PTB", "N_BOOKS", "N_PT_LINES"]

BOOK_LINES = ("dH", "supplied", "dissipated", "tire", "damper", "drag", "lever", "grade", "ground", "limiter",
              "external", "residual")
BOOK = IntEnum("BOOK", [(n.upper(), i) for i, n in enumerate(BOOK_LINES)])
BOOK.__doc__ = "Columns of one substep's plant books, in BOOK_LINES order."

POWERTRAIN_LINES = ("fuel", "powertrain", "engine", "crank", "converter", "driveline", "drive", "brakes",
                    "wheelspin", "sliding")
PTB = IntEnum("PTB", [(n.upper(), i) for i, n in enumerate(POWERTRAIN_LINES)])
PTB.__doc__ = "Columns of one driven substep's powertrain books, in POWERTRAIN_LINES order."

N_BOOKS = len(BOOK_LINES)
N_PT_LINES = len(POWERTRAIN_LINES)
