"""The CPU forward engine: the plant's substep compiled with Numba (numba_plant.py), held equal to
the torch reference (dyn4_gym.plant) by tests/test_engine.py.

Importing this package picks Numba's threading layer for the row-parallel kernels, unless the
user chose one (``NUMBA_THREADING_LAYER``) or a parallel kernel already ran in this process:
TBB first, then Numba's own work queue, GNU OpenMP last. Both TBB and the work queue are safe to
``fork()`` after a batched env stepped (GNU OpenMP terminates the child, and a
``multiprocessing.Pool`` then waits forever), and neither shares libgomp with torch, whose
thread count an OpenMP launch would reset (tests/test_processes.py). TBB also measured fastest
here at small batches (4 rows: 37k env steps/s against 12k on the work queue and under 100 on
OpenMP, which spin-waits on a 2-core machine).
"""

import os

import numba

if os.environ.get("NUMBA_THREADING_LAYER") is None and numba.config.THREADING_LAYER == "default":
    # a permutation of all three is required; OpenMP is only reached if the other two fail to load
    numba.config.THREADING_LAYER_PRIORITY = ["tbb", "workqueue", "omp"]
