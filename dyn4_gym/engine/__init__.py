"""The CPU forward engine: the plant's substep compiled with Numba (numba_plant.py), held equal to
the torch reference (dyn4_gym.plant) by tests/test_engine.py.

Importing this package picks Numba's threading layer for the row-parallel kernels, unless the
user chose one (``NUMBA_THREADING_LAYER``) or a parallel kernel already ran in this process:
TBB first, then Numba's own work queue, GNU OpenMP last. Both TBB and the work queue are safe to
``fork()`` after a batched env stepped (GNU OpenMP terminates the child, and a
``multiprocessing.Pool`` then waits forever), and neither shares libgomp with torch, whose
thread count an OpenMP launch would reset (tests/test_processes.py). The ``tbb`` wheel's library
is loaded from the environment's ``lib`` folder first (:func:`preload_tbb`: a venv's is off the
loader's path); where TBB still does not load, the task kernels serialise their parallel launches
across Python threads (the work queue is not thread-safe). TBB also measured fastest
here at small batches (4 rows: 37k env steps/s against 12k on the work queue and under 100 on
OpenMP, which spin-waits on a 2-core machine).

Numba's disk cache is kept per version of the kernels' sources: Numba checks a cached function
against its own file only, so after an edit of ``numba_plant.py`` the task kernel's cached copy
(``numba_task.py``, unchanged) would still hold the old plant inlined. The cache directory is
``$XDG_CACHE_HOME/dyn4_gym/numba/<hash of engine/ and model/>`` (``~/.cache`` by default) unless
``NUMBA_CACHE_DIR`` is set.
"""

import hashlib
import os
import sys
from pathlib import Path

import numba


def preload_tbb() -> str | None:
    """Load the ``tbb`` wheel's ``libtbb.so.12`` from this environment's ``lib`` folder, so that
    Numba's TBB layer finds it by name: the wheel puts it in ``<venv>/lib``, which is not on the
    loader's path, and without it Numba fell back to its work queue, which is not thread-safe
    (issue 46). Returns the path loaded, or None (not Linux, no such file, or it did not load:
    then the loader's own search decides, as before)."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return None
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix)):
        path = os.path.join(prefix, "lib", "libtbb.so.12")
        if os.path.isfile(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return path
            except OSError:
                continue
    return None


if os.environ.get("NUMBA_THREADING_LAYER") is None and numba.config.THREADING_LAYER == "default":
    # a permutation of all three is required; OpenMP is only reached if the other two fail to load
    numba.config.THREADING_LAYER_PRIORITY = ["tbb", "workqueue", "omp"]
    TBB_LIBRARY = preload_tbb()
else:
    TBB_LIBRARY = None


def _sources_digest() -> str:
    root = Path(__file__).resolve().parent
    h = hashlib.sha256(numba.__version__.encode())
    for f in sorted(list(root.glob("*.py")) + list((root.parent / "model").glob("*.py"))):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


if not os.environ.get("NUMBA_CACHE_DIR"):
    _base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    numba.config.CACHE_DIR = os.path.join(_base, "dyn4_gym", "numba", _sources_digest())
