"""`--help` without Hydra's group listing: the template in conf/config.yaml, filled from one compose.

Hydra's own `--help` lists every config group for `$APP_CONFIG_GROUPS`/`$HYDRA_CONFIG_GROUPS`
even when the template uses neither, deep-copying its config repository once per group (~85
copies, most of the command's time). Our template lists the options through `${option_groups:}`,
so one compose is all it needs; anything unusual (other flags, those placeholders) stays Hydra's.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from pipeline.config.location import CONFIG_NAME, config_dir

HELP_FLAGS = frozenset({"--help", "-h"})
# The placeholders Hydra fills; a template using one of them is left to Hydra.
_HYDRA_PLACEHOLDERS = ("FLAGS_HELP", "HYDRA_CONFIG_GROUPS", "APP_CONFIG_GROUPS", "CONFIG")


def quick_help_overrides(args: Sequence[str]) -> list[str] | None:
    """The overrides of a plain `--help` command line (`--help key=value ...`), else None."""
    if not any(arg in HELP_FLAGS for arg in args):
        return None
    if any(arg.startswith("-") and arg not in HELP_FLAGS for arg in args):
        return None  # another flag (--config-dir, -m, --resolve, ...): Hydra's help handles it
    return [arg for arg in args if arg not in HELP_FLAGS]


def quick_help_text(overrides: Sequence[str]) -> str | None:
    """The help text Hydra would print for these overrides, or None when the template uses one
    of Hydra's own placeholders (then only Hydra can fill it)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(
        config_dir=str(config_dir()), version_base="1.3", job_name="delegate-debugger"
    ):
        cfg = compose(CONFIG_NAME, overrides=list(overrides), return_hydra_config=True)
        template = string.Template(str(cfg.hydra.help.template))
    if any(name in template.get_identifiers() for name in _HYDRA_PLACEHOLDERS):
        return None
    return template.substitute()
