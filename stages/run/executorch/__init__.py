"""ExecuTorch's own runtime as the run stage's plug-in: plain runs, tapped runs, and generation."""
