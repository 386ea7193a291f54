"""Stage fingerprints, the project's import graph, the stage cache and run-dir names."""
