"""Links into the MLflow UI that open on this tool's runs, not MLflow's GenAI overview.

MLflow 3.17's UI picks an experiment's landing page from a UI-wide "workflow type" (the GenAI /
Model training switch, kept in the browser, GenAI by default), not from any experiment tag: the
bare experiment URL lands on the GenAI overview (traces, token usage), which this tool never logs.
The `workflowType=machine_learning` query parameter selects "Model training", whose experiment
page is the runs table.
"""

from __future__ import annotations

LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` listens by default
RUNS_VIEW = "workflowType=machine_learning"


def runs_page_url(base: str, experiment_id: str, run_id: str | None = None) -> str:
    """The experiment's runs table (or one run's page) in the MLflow UI at `base`."""
    page = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs"
    if run_id is not None:
        page += f"/{run_id}"
    return f"{page}?{RUNS_VIEW}"


def view_hint(uri: str) -> str:
    """How to look at a tracking store: its UI when it is a server, else the `mlflow ui` line."""
    if uri.startswith(("http://", "https://")):
        return f"view at {uri}"
    return f"view with: mlflow ui --backend-store-uri {uri}, then open {LOCAL_UI}"
