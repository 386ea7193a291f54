"""ExecuTorch as a lowering: its partitioners and precisions, ops kept off or in float, faults on its kernels, and the taps that log values inside its delegates."""
