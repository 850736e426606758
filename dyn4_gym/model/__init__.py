"""The model layer: every layout and shared number of the plant and the task, in one home.

Both engines read these by name: the torch reference (:mod:`dyn4_gym.plant`,
:class:`dyn4_gym.envs.core.TaskCore`) and the Numba kernels (:mod:`dyn4_gym.engine`), and so do
the tests and the docs (docs/engines.md). Nothing here imports torch, numpy or Numba, and nothing
here imports the rest of the package, so every layer may import it.

- :mod:`.state`: the plant's and the powertrain's state vectors (named indices).
- :mod:`.books`: the energy books' lines and the powertrain's lines, in order.
- :mod:`.task`: the observation table, the built-in reward terms (order, weight, doc), the
  packed info and flag columns of one env step.
- :mod:`.packed`: how the kernels receive parameters, powertrains, terrains and task constants.
- :mod:`.constants`: the numbers both engines share (floors, blends, widths, defaults).

Kernels index with these IntEnums (``x[S.VX]``); Numba compiles a named integer constant to the
same code as a literal.
"""

from . import books, constants, packed, state, task  # noqa: F401
