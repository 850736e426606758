"""dyn4-gym: a differentiable four-wheel vehicle plant in torch, and Gymnasium environments on it."""

__version__ = "0.1.0"
