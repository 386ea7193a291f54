"""Command-line mistakes caught before Hydra composes, and Hydra's own errors made short.

A wrong option (`model=vitt`) gets one line naming the group and its options (schemas, which
back every option, are not options); Hydra's errors lose their internals (full_key,
reference_type, the HYDRA_FULL_ERROR hint) and keep what names the option and its valid values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from omegaconf import DictConfig, OmegaConf

from pipeline.config.location import config_dir

SCHEMA_SUFFIX = "_schema"
OPTION_GROUPS_RESOLVER = "option_groups"
SHOWN_CONFIG_RESOLVER = "shown_config"
# Fields the pipeline sets for itself; printing them invites editing what is not an option.
INTERNAL_FIELDS = ("model.kwargs_for",)
_HINTS = {
    "model": " (your own model: model=custom model._target_=pkg.module.fn "
    "'model.inputs=[{shape:[1,3,224,224]}]')",
    "backend": " (your own backend: backend._target_=pkg.module.Class)",
}
_HYDRA_NOISE = re.compile(
    r"^\s*(full_key|reference_type|object_type|Set the environment variable HYDRA_FULL_ERROR)"
)


_MORE_CONFIGS = ("--config-dir", "-cd", "--config-path", "-cp", "hydra.searchpath", "--info", "-i")


class CommandLineError(Exception):
    """An override names no option of its group; the message says which ones exist."""


def option_groups() -> dict[str, list[str]]:
    """{group: its options} from conf/ and the config store, schemas left out."""
    from hydra.core.config_store import ConfigStore

    groups: dict[str, set[str]] = {}
    for entry in config_dir().iterdir():
        if entry.is_dir() and entry.name not in ("hydra", "__pycache__"):
            names = {f.name[:-5] for f in entry.iterdir() if f.name.endswith(".yaml")}
            groups[entry.name] = names
    for group, node in ConfigStore.instance().repo.items():
        if isinstance(node, dict) and group != "hydra" and group in groups:
            groups[group] |= {name.removesuffix(".yaml") for name in node}
    return {
        group: sorted(n for n in names if not n.endswith(SCHEMA_SUFFIX))
        for group, names in sorted(groups.items())
    }


def more_configs(args: Sequence[str]) -> bool:
    """Another config dir or search path is given: options this package does not ship may exist."""
    return any(a.split("=", 1)[0] in _MORE_CONFIGS for a in args)


def check_group_choices(args: Sequence[str]) -> None:
    """Raise CommandLineError for `group=option` (or a sweep's `group=a,b`) naming no option.

    With another config dir or search path, options this package does not ship may exist:
    Hydra, which sees them, decides."""
    if more_configs(args):
        return
    groups = option_groups()
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        group = key.lstrip("+~").split("@", 1)[0]
        if group not in groups or any(c in value for c in "()[]{}*$"):
            continue
        for choice in (v.strip() for v in value.split(",")):
            if choice and choice != "null" and choice not in groups[group]:
                raise CommandLineError(
                    f"{key}={value}: '{choice}' is not a {group} option; choose one of "
                    f"{', '.join(groups[group])}{_HINTS.get(group, '')}"
                )


def short_hydra_error(exc: BaseException) -> str:
    """Hydra's composition error and its cause as a few lines, without Hydra's internals."""
    parts = [str(exc)]
    if exc.__cause__ is not None and str(exc.__cause__) not in parts[0]:
        parts.append(str(exc.__cause__))
    lines = [
        line.strip()
        for part in parts
        for line in part.splitlines()
        if line.strip() and not _HYDRA_NOISE.match(line)
    ]
    return "\n  ".join(lines[:4])


def _groups_text() -> str:
    return "\n".join(f"{group}: {', '.join(names)}" for group, names in option_groups().items())


def _shown_config(*, _root_: object) -> str:
    """The composed config as --help prints it: no hydra node, no internal fields."""
    container = OmegaConf.to_container(cast(DictConfig, _root_), enum_to_str=True)
    if not isinstance(container, dict):
        return ""
    container.pop("hydra", None)
    for field in INTERNAL_FIELDS:
        parent, _, name = field.rpartition(".")
        node = container
        for key in parent.split("."):
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(name, None)
    # Hydra fills the help template with string.Template: a literal `$` (`${...}`) is `$$`.
    return OmegaConf.to_yaml(container).replace("$", "$$")


def register_help_resolvers() -> None:
    """`${option_groups:}` and `${shown_config:}` for the --help template in conf/config.yaml."""
    OmegaConf.register_new_resolver(OPTION_GROUPS_RESOLVER, _groups_text, replace=True)
    OmegaConf.register_new_resolver(SHOWN_CONFIG_RESOLVER, _shown_config, replace=True)
