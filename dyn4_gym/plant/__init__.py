"""The differentiable plants: spec sheets, parameters, the single-track and four-wheel steps.

>>> import torch
>>> from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step
>>> from dyn4_gym.ground import Flat
>>> p = dyn4_params(HUMVEE, dtype=torch.float64)
>>> x = dyn4_rest(p, Flat(mu=0.8), batch_shape=(4,))
>>> x = dyn4_step(x, torch.zeros(4, 2, dtype=torch.float64), p, Flat(mu=0.8), hdt=0.01)
"""

from .bike import bike_step
from .drive import drive_rollout, drive_step
from .dyn4 import dyn4_drive_step, dyn4_rest, dyn4_step
from .energy import Books, dyn4_energy, ph_rhs, ph_structure, sum_books
from .powertrain import HMMWV_CHRONO_POWERTRAIN, HUMVEE_POWERTRAIN, PT, PowertrainBooks, PowertrainParams, powertrain_rest
from .params import BikeParams, Dyn4Params, bike_params, dyn4_params, fit_pacejka, params_in_frame
from .rollout import rollout
from .spec import HMMWV_CHRONO, HUMVEE, VehicleSpec
from .state import BIKE, DYN4, WHEELS, dyn4_state

__all__ = [
    "HUMVEE", "HMMWV_CHRONO", "HMMWV_CHRONO_POWERTRAIN", "VehicleSpec", "BikeParams", "Dyn4Params", "bike_params", "dyn4_params", "fit_pacejka",
    "params_in_frame", "Books", "dyn4_energy", "ph_rhs", "ph_structure", "sum_books", "bike_step", "dyn4_step", "dyn4_rest", "dyn4_drive_step",
    "drive_step", "drive_rollout", "HUMVEE_POWERTRAIN", "PT", "PowertrainBooks", "PowertrainParams", "powertrain_rest", "rollout", "BIKE", "DYN4", "WHEELS", "dyn4_state",
]
