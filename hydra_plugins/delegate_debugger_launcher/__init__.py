"""The pipeline's Hydra launcher plugin (Hydra finds launchers only under `hydra_plugins`)."""
