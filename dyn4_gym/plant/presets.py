"""Named vehicles: a spec sheet and the powertrain that goes with it (docs/plant.md, "Against
Chrono's HMMWV"). The envs pick one with ``preset=`` (``"m998"`` by default); the plant's
functions take the two parts directly.
"""

from __future__ import annotations

from types import MappingProxyType

from .powertrain import HMMWV_CHRONO_POWERTRAIN, HUMVEE_POWERTRAIN
from .spec import HMMWV_CHRONO, HUMVEE

__all__ = ["PRESETS"]

# name -> (VehicleSpec, PowertrainParams)
PRESETS = MappingProxyType({
    "m998": (HUMVEE, HUMVEE_POWERTRAIN),  # the M998 HMMWV: its published top speed, a diesel's idle
    "chrono": (HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN),  # Chrono's HMMWV model (LFDM's copy of its data)
})  # read-only: a preset is published data, not a setting to change in place (issue 46)
