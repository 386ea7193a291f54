"""Where the tool's own Hydra configs are: found from this file, never through the import
system, so a `conf/` folder in the user's working directory cannot take their place."""

from __future__ import annotations

from pathlib import Path

CONFIG_NAME = "config"


def config_dir() -> Path:
    """The absolute path of the tool's `conf/` folder (beside the `pipeline` package)."""
    found = Path(__file__).resolve().parents[2] / "conf"
    if not (found / f"{CONFIG_NAME}.yaml").is_file():
        raise FileNotFoundError(
            f"the tool's configs are missing: no {found / CONFIG_NAME}.yaml (reinstall the package)"
        )
    return found
