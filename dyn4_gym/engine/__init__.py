"""The CPU forward engine: the plant's substep compiled with Numba (numba_plant.py), held equal to
the torch reference (dyn4_gym.plant) by tests/test_engine.py."""
