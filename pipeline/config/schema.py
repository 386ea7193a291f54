"""Structured-config schemas: every config group is backed by a dataclass in Hydra's ConfigStore.

The stage slices reuse the dataclasses each stage declares, so a typo or a wrong type fails at
compose time with Hydra's own message naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from pipeline.config.backend_option import register_backend_name_resolver
from stages.analyze.config import AnalyzeConfig
from stages.export.config import ExportConfig, InputsConfig, ModelConfig
from stages.lower.config import BackendConfig
from stages.run.config import RuntimeConfig


class StageName(Enum):
    """The stages, in pipeline order (`stages=[...]` entries). A plain Enum, not a str one: a
    member named `lower` would shadow `str.lower`; `stage_names` turns members into strings."""

    export = "export"
    lower = "lower"
    run = "run"
    analyze = "analyze"


STAGE_ORDER: tuple[str, ...] = tuple(stage.value for stage in StageName)


def stage_names(entries: list[Any]) -> list[str]:
    """`stages=` entries (StageName members from a composed config, or strings) as names."""
    return [entry.value if isinstance(entry, StageName) else str(entry) for entry in entries]


@dataclass
class TrackingConfig:
    """Where runs are logged. `uri: null` means a sqlite store under outputs/ (or MLFLOW_TRACKING_URI)."""

    enabled: bool = True
    uri: str | None = None
    experiment: str = "delegate-debugger"
    run_name: str | None = None
    max_param_length: int = 500
    # Unreachable server: keep everything locally and print how to upload it later.
    fallback_to_local: bool = True
    # An unchanged re-run (same config, every stage reused) logs no duplicate run unless true.
    log_unchanged: bool = False


class SearchKind(StrEnum):
    """The searches `search=...` selects (pipeline/searches): what to keep in float, what to keep
    off the delegate, and the smallest failing program."""

    precision = "precision"
    delegation = "delegation"
    reduce = "reduce"


@dataclass
class SearchConfig:
    """`search=precision|delegation|reduce` (a sweep: the search's sweeper runs the trials)."""

    kind: SearchKind | None = None
    # At most this many trials (the proving re-run included); the search stops with what it has.
    max_trials: int = 40
    # precision: also measure each op alone low precision and alone kept float (2 trials per op).
    sensitivity: bool = True
    # Reuse the outcomes of trials an interrupted run of the same search recorded.
    resume: bool = True


@dataclass
class PipelineConfig:
    """The whole composed config (conf/config.yaml)."""

    defaults: list[Any] = field(
        default_factory=lambda: [
            "_self_",
            {"model": "vit"},
            {"backend": "xnnpack"},
            {"runtime": "emulated"},
            {"analyze": "default"},
            {"tracking": "mlflow"},
        ]
    )
    model: ModelConfig = MISSING
    backend: BackendConfig = MISSING
    runtime: RuntimeConfig = MISSING
    analyze: AnalyzeConfig = MISSING
    tracking: TrackingConfig = MISSING
    search: SearchConfig = field(default_factory=SearchConfig)
    inputs: InputsConfig = field(default_factory=InputsConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    stages: list[StageName] = field(default_factory=lambda: list(StageName))
    # Where artifacts go when run without Hydra; under Hydra, hydra.run.dir decides.
    run_dir: str | None = None
    # Fingerprint cache shared by runs (a sweep's jobs export a model once through it).
    cache_dir: str = "outputs/cache"
    cache: bool = True
    # The stage cache's bound in MB: each store removes least recently used entries past it
    # (pipeline/cache/cache_bound.py); 0: no bound.
    cache_max_mb: int = 2048


def _open_kwargs(schema: type) -> Any:
    """A schema with an open `kwargs` dict, so `GROUP.kwargs.NAME=VALUE` passes any argument
    (the factory's or loader's signature checks the names when it is called)."""
    node = OmegaConf.structured(schema)
    OmegaConf.set_struct(node.kwargs, False)
    return node


def _model_schema() -> Any:
    """ModelConfig with an open `kwargs` dict (`model.kwargs.NAME=VALUE`)."""
    return _open_kwargs(ModelConfig)


from pipeline.config.model_name import register_factory_name_resolver  # noqa: E402


def register_configs() -> None:
    """Register the top-level schema, one schema per config group, and the resolver that
    names the backend after its class."""
    register_backend_name_resolver()
    register_factory_name_resolver()
    cs = ConfigStore.instance()
    cs.store(name="pipeline_schema", node=PipelineConfig)
    cs.store(group="model", name="model_schema", node=_model_schema())
    cs.store(group="backend", name="backend_schema", node=BackendConfig)
    cs.store(group="runtime", name="runtime_schema", node=RuntimeConfig)
    cs.store(group="analyze", name="analyze_schema", node=AnalyzeConfig)
    cs.store(group="tracking", name="tracking_schema", node=TrackingConfig)
    cs.store(group="inputs", name="inputs_schema", node=_open_kwargs(InputsConfig))
