"""The samples a run calibrates on and is judged on: sources (random, files, loader) streamed one
sample at a time, each checked against model.inputs, then split into calibration and evaluation."""
