"""`--help` from one compose: the same text as Hydra's own help, without listing config groups."""

from __future__ import annotations

import pytest
from hydra import initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra

from pipeline.config.front_door import register_help_resolvers
from pipeline.config.location import CONFIG_NAME, config_dir
from pipeline.config.quick_help import quick_help_overrides, quick_help_text
from pipeline.config.schema import register_configs

register_configs()
register_help_resolvers()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], []),
        (["-h", "model=mlp", "backend=qnn"], ["model=mlp", "backend=qnn"]),
        (["model=mlp", "--help"], ["model=mlp"]),
        (["model=mlp"], None),  # no help asked
        (["--help", "--config-dir", "/elsewhere"], None),  # another flag: Hydra's help
        (["--help", "-m", "model=vit,mlp"], None),
        (["--hydra-help"], None),
    ],
)
def test_only_a_plain_help_command_line_takes_the_quick_path(
    args: list[str], expected: list[str] | None
) -> None:
    assert quick_help_overrides(args) == expected


def _hydra_help(overrides: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What Hydra's own `--help` prints for these overrides (its app_help, in process)."""
    capsys.readouterr()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        args = get_args_parser().parse_args(["--help", *overrides])
        hydra.app_help(config_name=CONFIG_NAME, args_parser=get_args_parser(), args=args)
    return capsys.readouterr().out


def test_quick_help_is_hydras_help_without_listing_config_groups(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    overrides = ["model=mlp", "backend=qnn", "runtime.iterations=3"]
    listed: list[str] = []
    real_options = ConfigLoaderImpl.get_group_options

    def counting_options(self: ConfigLoaderImpl, group_name: str, *args: object, **kw: object):
        listed.append(group_name)
        return real_options(self, group_name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ConfigLoaderImpl, "get_group_options", counting_options)
    text = quick_help_text(overrides)
    assert listed == []  # one compose, no deep copy of the repository per config group
    assert text is not None
    assert (
        "model: cond_model, custom, deep_outlier_mlp, digits_cnn, hf_audio, hf_text, hf_vision, llm"
        in text
        and "iterations: 3" in text
    )
    assert "name: mlp" in text and "_schema" not in text and "kwargs_for" not in text
    hydras = _hydra_help(overrides, capsys)
    assert len(listed) > 10  # Hydra's help lists every group, twice
    assert text + "\n" == hydras
