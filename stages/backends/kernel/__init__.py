"""The emulated delegates' kernels: the plan preprocess writes, its blob, and the runtime that executes it."""
