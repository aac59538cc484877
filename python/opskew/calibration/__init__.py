"""Calibrations: the torch-free store (store.py) and what measures them
(runner.py). Importing the package imports neither."""
