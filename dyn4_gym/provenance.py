"""Where a figure was measured: the interpreter, the packages and the CPU, written beside the
benchmarks' and sweeps' outputs. A seeded run repeats to the last digit on one machine but not
across machines (one PPO seed's eco figure moved by 0.33 L/100 km between two; docs/sweeps.md),
so every run says which machine made it."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform

# the distributions whose versions can move a trained figure (the plant, its kernels, the learners)
PACKAGES = ("dyn4-gym", "torch", "numpy", "numba", "llvmlite", "gymnasium", "stable-baselines3", "ray")
# the records' file, beside a benchmark's or a sweep's outputs (and docs/'s, beside the rows it keeps)
FILE = "machines.jsonl"


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def llvm_cpu() -> str | None:
    """The CPU as LLVM names it for Numba's code (``skylake-avx512``, say): machine code, and so
    the rounding of a kernel's sums, can differ between two CPUs of one brand name."""
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return None
    return llvm.get_host_cpu_name()


def machine() -> dict:
    """This process's machine: Python, OS, CPU model (its name and LLVM's) and count, and each of
    ``PACKAGES``' installed version (None where it is not installed)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return dict(python=platform.python_version(), os=platform.platform(), cpu=cpu_model(), llvm_cpu=llvm_cpu(), cores=os.cpu_count(),
                packages=versions)


def record(path: str, **what) -> dict:
    """Append one JSON line to ``path``: ``what`` (the run it is for), the UTC time and
    :func:`machine`; returns the line's record."""
    rec = dict(what, utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **machine())
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    return rec


def records(path: str) -> list[dict]:
    """The records :func:`record` appended to ``path``, oldest first; none where it does not exist."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
