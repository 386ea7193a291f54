"""Sweeps: the Hydra callback, failed-job markers, the comparison of finished runs."""
