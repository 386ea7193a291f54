"""Shared fixtures: compose tiny Hydra configs that write into tmp_path; every MLflow store a test
opens by default is under its temp dir, and the run fails if the suite changed the checkout."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from pathlib import Path

import pytest
from omegaconf import DictConfig

from tests.helpers.clean_tree import tree_changes, tree_status
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.optional import REQUIRE_ENV

REPO = Path(__file__).resolve().parents[1]
_TREE_BEFORE = pytest.StashKey[set[str] | None]()


def pytest_configure(config: pytest.Config) -> None:
    """Snapshot the working tree (controller only: xdist workers share the checkout)."""
    if not hasattr(config, "workerinput"):
        config.stash[_TREE_BEFORE] = tree_status(REPO)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when tests wrote into (or removed from) the checkout."""
    before = session.config.stash.get(_TREE_BEFORE, None)
    after = tree_status(REPO) if before is not None else None
    if before is None or after is None:
        return
    changed = tree_changes(before, after)
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "the test suite changed the checkout (write under tmp_path instead):\n  " + (
            "\n  ".join(changed)
        )
        if reporter is not None:
            reporter.write_line("\n" + message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# Fixtures whose users in several files share what they build, by group: the session's
# generation runs (one stage cache), and the ExecuTorch corpus (harvested once per checkout under
# a file lock: split over two workers, one would wait idle for the other's harvest). Other
# session fixtures serve so many files that one worker would get too much.
SHARED_FIXTURE_GROUPS = {"run_generation": "run_generation", "corpus": "executorch_corpus"}


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test using a listed fixture (its group) or a module-scoped fixture
    (the test's module), else None."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    names = info.names_closure
    for name in names:
        if name in SHARED_FIXTURE_GROUPS and info.name2fixturedefs.get(name):
            return SHARED_FIXTURE_GROUPS[name]
    for name in names:
        definitions = info.name2fixturedefs.get(name) or ()
        if definitions and definitions[-1].scope == "module":
            return item.nodeid.split("::")[0]
    return None


# Modules of long end-to-end runs (real ExecuTorch lowerings of whole models, a PostgreSQL-backed
# server, a browser): marked `slow`. The README's test command runs them; CI runs them on its
# first Python and deselects them on the others (.ci/other_pythons.sh), which repeat the rest.
SLOW_MODULES = frozenset(
    {
        "tests/analyze/compare/gap/test_per_sample_rows.py",
        "tests/analyze/compare/test_expected_error_rotary.py",
        "tests/analyze/generation/test_executorch_generation.py",
        "tests/analyze/generation/test_generation_runs.py",
        "tests/analyze/generation/test_hf_generation.py",
        "tests/analyze/link/xnnpack/test_recovery.py",
        "tests/analyze/test_any_output_structure.py",
        "tests/analyze/test_observe_bisect_executorch.py",
        "tests/analyze/test_tapped_batchnorm_folds.py",
        "tests/analyze/test_zoo_clean_runs.py",
        "tests/backends/test_author_backend.py",
        "tests/e2e/test_hf_architectures.py",
        "tests/e2e/test_inputs_sources.py",
        "tests/e2e/test_property_graphs.py",
        "tests/e2e/test_task_budget_exit_code.py",
        "tests/e2e/test_verdict_exit_codes.py",
        "tests/export/test_cut_conv_batchnorm.py",
        "tests/export/zoo/test_digits_backends.py",
        "tests/export/zoo/test_hf_corpus.py",
        "tests/formats/executorch/test_corpus.py",
        "tests/formats/executorch/test_xnnpack_graph.py",
        "tests/formats/test_float_reference_multi_output.py",
        "tests/formats/test_shared_weights.py",
        "tests/formats/test_zip_bombs.py",
        "tests/lower/executorch/test_8da4w_runs.py",
        "tests/lower/executorch/test_backends.py",
        "tests/lower/executorch/test_conv_batchnorm_int8.py",
        "tests/lower/executorch/test_fp16_pins.py",
        "tests/lower/executorch/test_fusion_groups.py",
        "tests/lower/executorch/test_nan_fault.py",
        "tests/lower/executorch/test_precision.py",
        "tests/lower/executorch/test_tap.py",
        "tests/lower/executorch/test_tap_values_proven.py",
        "tests/lower/test_lowering_matrix.py",
        "tests/pipeline/searches/test_precision_at_scale.py",
        "tests/pipeline/searches/test_searches_cli.py",
        "tests/pipeline/searches/test_searches_executorch.py",
        "tests/pipeline/searches/test_task_budget_searches.py",
        "tests/pipeline/sweeps/test_sweep.py",
        "tests/pipeline/tools/test_clean.py",
        "tests/pipeline/tools/test_explore.py",
        "tests/pipeline/tools/test_pack_etrecord.py",
        "tests/pipeline/tracking/test_dependency_logs.py",
        "tests/pipeline/tracking/test_mlflow_server.py",
        "tests/pipeline/tracking/test_mlflow_ui_landing.py",
        "tests/pipeline/tracking/test_postgres_server.py",
        "tests/pipeline/tracking/test_tracking.py",
        "tests/pipeline/tracking/test_tracking_uri.py",
        "tests/pipeline/tracking/test_unchanged_runs.py",
    }
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `-n 2` (`--dist loadgroup` in pyproject.toml) the tests sharing a module-scoped
    fixture run on one worker, so what the fixture builds (an export, a lowering, a corpus, a
    server) is built once, not once per worker. A module with a listed fixture's users joins
    that fixture's group whole (its own module fixtures stay on one worker too)."""
    groups = {item: _shared_fixture_group(item) for item in items}
    module_groups = {
        item.nodeid.split("::")[0]: group
        for item, group in groups.items()
        if group in SHARED_FIXTURE_GROUPS.values()
    }
    for item, group in groups.items():
        if item.nodeid.split("::")[0] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if group is not None:
            module = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(module_groups.get(module, group)))


@pytest.fixture(scope="session", autouse=True)
def _session_tracking_store(tmp_path_factory: pytest.TempPathFactory) -> Generator[None]:
    """Session-scoped fixtures' MLflow store (the fluent API's default is ./mlflow.db)."""
    store = tmp_path_factory.mktemp("session_store") / "mlflow.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
        yield


@pytest.fixture(autouse=True)
def _tracking_store_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's default MLflow store is the one `python -m pipeline` would make in tmp_path."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """With $REQUIRE_OPTIONAL_PARTS=1 (CI) a skip is a failure that says what was missing."""
    if report.skipped and os.environ.get(REQUIRE_ENV) == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but {REQUIRE_ENV}=1 requires every optional part: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator:
    """A skip inside a test (or its fixtures)."""
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator:
    """A skip at module level (`pytest.importorskip` at the top of a test file)."""
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DictConfig]:
    """make_cfg(*overrides) -> composed config writing under tmp_path."""

    def _make(*overrides: str) -> DictConfig:
        return compose_config(tmp_path, overrides)

    return _make


@pytest.fixture
def tiny_cfg(make_cfg: Callable[..., DictConfig]) -> Callable[..., DictConfig]:
    """tiny_cfg("vit", *more_overrides) -> a composed config with a tiny model."""

    def _make(model: str, *overrides: str) -> DictConfig:
        return make_cfg(*TINY_MODEL_OVERRIDES[model], *overrides)

    return _make
