"""An optional ``torch.compile`` path for the plant steps, with eager as the fallback.

At batch 1 an eager substep costs a few hundred small-tensor dispatches; compiled with
Inductor it is one fused kernel (see ``benchmarks/plant.py`` for the figures). The compiled
step is numerically the same function (tested to float rounding over 20 steps in ``tests/test_fast.py``).
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["compiled_step"]


def compiled_step(step, p, g=None, hdt: float = 0.01, **kwargs):
    """``f(x, u) -> step(x, u, p, g, hdt=hdt, **kwargs)``, compiled when torch.compile works here.

    Compilation happens on the first call; if it fails (no C++ compiler, an unsupported
    platform), a warning is issued and the eager step is used from then on.
    """

    def eager(x, u):
        return step(x, u, p, g, hdt=hdt, **kwargs)

    try:
        fast = torch.compile(eager, dynamic=False)
    except Exception as exc:  # pragma: no cover - platform dependent
        warnings.warn(f"torch.compile unavailable ({exc}); using the eager step", RuntimeWarning)
        return eager
    state = {"fn": fast}

    def call(x, u):
        try:
            return state["fn"](x, u)
        except Exception as exc:  # pragma: no cover - platform dependent
            if state["fn"] is eager:
                raise
            warnings.warn(f"torch.compile failed ({type(exc).__name__}: {exc}); using the eager step", RuntimeWarning)
            state["fn"] = eager
            return eager(x, u)

    return call
