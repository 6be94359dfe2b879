"""The experiment's comparison as one page of the MLflow UI: a *shared view* (what the runs page's
Share button writes), kept in the experiment tag ``mlflow.sharedViewState.forecast-compare``.

MLflow 3.17's UI reads that tag's value as plain JSON when it is not its own compressed form, and
opens it from ``#/experiments/<id>/runs?viewStateShareKey=forecast-compare``: the runs table with
the model runs only (``tags.role = 'model'``: the baselines' nested runs carry the same metric
names and would be rows of their own once the table is ordered by a metric, which un-nests it),
best selection MAE first, family, selection and test MAE beside the baselines', skill, interval
coverage and the registered version as columns, and a chart view: test MAE beside each baseline's
per run in one grouped bar chart, then one bar chart per figure.
Only metrics the experiment's model runs log get a column or chart: no empty columns."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

import mlflow
from mlflow.exceptions import MlflowException

from infra.database_urls import missing_sqlite_store

SHARE_KEY = "forecast-compare"  # stable: the URL stays the same run after run
TAG_PREFIX = "mlflow.sharedViewState."  # the UI's own prefix for shared views
MODEL_RUNS = "tags.role = 'model'"
ORDER_METRIC = "selection_mae"  # what models are chosen by; never test
REGISTERED_TAG = "registered"  # "demo-forecaster v2 @champion", kept on the run when aliases move
FAMILY_TAG = "model.family"
# The UI's section its generated charts go to ("Model metrics"): every metric the view does not
# chart lands there, folded, instead of dozens of charts above the comparison.
OTHER_CHARTS_SECTION = "Model metrics"
# The default table shows up to 10 runs and each bar chart compares the first 10 visible ones.
RUNS_IN_CHARTS = 10
# The ids of the table's fixed columns (MLflow 3.17's runs table)
RUN_NAME, CREATED, DURATION = "attributes.`Run Name`", "runDateAndNestInfo", "duration"
COVERAGE = re.compile(r"test_coverage_\d+")
BASELINE_TEST_MAE = re.compile(r"\w+_test_mae")  # naive_test_mae, seasonal_naive_test_mae


def column(kind: str, key: str) -> str:
    """A runs-table column id as the UI builds it: ``metrics.`test_mae```, ``tags.`model.family```."""
    return f"{kind}.`{key}`"


def width(column_id: str) -> int:
    """Pixels for a column: its header in full, room for about 10 characters of the value (the
    table shows a metric unrounded, cut with an ellipsis; its tooltip has every digit), and no
    wider, so that the columns most compared (selection, test, naive MAE) fit beside the run
    names on a laptop's screen."""
    header = column_id.split("`")[1]
    return 8 * max(len(header), 10) + 24


def view_metrics(logged: Iterable[str]) -> list[str]:
    """The metrics the view shows, in column order, of those ``logged``: selection MAE (the order),
    test MAE, each baseline's test MAE (naive first), skill versus naive, interval coverage."""
    logged = set(logged)
    baselines = sorted(
        (m for m in logged if BASELINE_TEST_MAE.fullmatch(m)), key=lambda m: (m != "naive_test_mae", m)
    )
    coverage = sorted((m for m in logged if COVERAGE.fullmatch(m)), key=lambda m: int(m.rsplit("_", 1)[1]))
    wanted = [ORDER_METRIC, "test_mae", *baselines, "test_skill_vs_naive", *coverage]
    return [m for m in wanted if m in logged]


def bar_chart(metric: str, section: str) -> dict[str, object]:
    """A chart card as the UI stores it (its RunsChartsBarCardConfig)."""
    return {
        "uuid": f"{SHARE_KEY}-{metric}",
        "type": "BAR",
        "runsCountToCompare": RUNS_IN_CHARTS,
        "metricSectionId": section,
        "deleted": False,
        "isGenerated": False,
        "displayName": metric,
        "metricKey": metric,
    }


def against_baselines_chart(metrics: list[str], section: str) -> dict[str, object] | None:
    """One grouped bar chart, first: per run, its test MAE beside each baseline's on the same
    windows (the comparison the project is about), or None when no baseline's is logged."""
    shown = [m for m in metrics if m == "test_mae" or BASELINE_TEST_MAE.fullmatch(m)]
    if "test_mae" not in shown or len(shown) < 2:
        return None
    return {
        **bar_chart("test_mae", section),
        "uuid": f"{SHARE_KEY}-test-mae-vs-baselines",
        "displayName": "test MAE vs " + ", ".join(m.removesuffix("_test_mae") for m in shown[1:]),
        "selectedMetricKeys": shown,
    }


def view_state(metrics: list[str]) -> dict[str, object]:
    """The shared view's JSON: search facets plus the UI state the Share button saves."""
    columns = [column("tags", FAMILY_TAG), *(column("metrics", m) for m in metrics)]
    columns.append(column("tags", REGISTERED_TAG))  # shown once a run carries it
    charted = f"{SHARE_KEY}-section"
    sections = [
        {"uuid": charted, "name": "Model comparison", "display": True, "isReordered": False},
        {"uuid": f"{SHARE_KEY}-other", "name": OTHER_CHARTS_SECTION, "display": False, "isReordered": False},
    ]
    return {
        "searchFilter": MODEL_RUNS,
        "orderByKey": column("metrics", ORDER_METRIC),
        "orderByAsc": True,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": columns,
        "columnOrder": [RUN_NAME, CREATED, *columns, DURATION],
        "columnWidths": {c: width(c) for c in columns},
        "runsExpanded": {},  # the baselines' nested runs stay folded
        "runsPinned": [],
        "runsHidden": [],
        "runsVisibilityMap": {},
        "runsHiddenMode": "FIRST_10_RUNS",
        "compareRunCharts": [
            *filter(None, [against_baselines_chart(metrics, charted)]),
            *(bar_chart(m, charted) for m in metrics),
        ],
        "compareRunSections": sections,
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": True,  # keep the comparison section first
        "groupBy": None,
        "groupsExpanded": {},
        "autoRefreshEnabled": True,
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
        "globalLineChartConfig": {"xAxisKey": "step", "lineSmoothness": 0, "selectedXAxisMetricKey": ""},
    }


def logged_metrics(client: mlflow.MlflowClient, experiment_id: str) -> set[str]:
    """Every metric key any of the experiment's model runs logged."""
    keys: set[str] = set()
    token = None
    while True:
        page = client.search_runs([experiment_id], MODEL_RUNS, max_results=1000, page_token=token)
        for run in page:
            keys.update(run.data.metrics)
        token = page.token
        if not token:
            return keys


def fragment(experiment_id: str) -> str:
    """The view's address below the UI's root; ``workflowType`` opens the runs table even in a
    browser whose UI was last switched to GenAI."""
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={SHARE_KEY}&workflowType=machine_learning"


def write_shared_view(client: mlflow.MlflowClient, experiment_id: str) -> str:
    """Writes (or rewrites) the experiment's shared view from what its runs log; returns its
    address below the UI's root (see ``fragment``)."""
    state = view_state(view_metrics(logged_metrics(client, experiment_id)))
    client.set_experiment_tag(experiment_id, TAG_PREFIX + SHARE_KEY, json.dumps(state, separators=(",", ":")))
    return fragment(experiment_id)


def ui_root(tracking_uri: str, port: int = 5000) -> str:
    """Where the UI answers: the tracking server itself, else `forecast ui` on loopback. A server's
    credentials (``https://user:token@host``) stay out: the address is printed, and a browser
    signs in on its own."""
    if tracking_uri.startswith(("http://", "https://")):
        parts = urlsplit(tracking_uri)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", "")).rstrip("/")
    return f"http://127.0.0.1:{port}"


def view_url(tracking_uri: str, experiment_id: str, port: int = 5000) -> str:
    return f"{ui_root(tracking_uri, port)}/{fragment(experiment_id)}"


def print_view_url(tracking_uri: str, experiment_id: str) -> None:
    """The line `forecast compare` ends with: where the same comparison opens in the UI."""
    url = view_url(tracking_uri, experiment_id)
    if tracking_uri.startswith(("http://", "https://")):
        print(f"In the MLflow UI: {url}")
    else:
        print(f"In the MLflow UI (start it with `forecast ui`): {url}")


def refresh_after_training(client: mlflow.MlflowClient, experiment_id: str) -> None:
    """The view after a finished run, or for `forecast compare`. One that cannot be written (a
    store refusing experiment tags, a user who may only read) costs a warning line, never the run
    just trained nor the comparison: the next training or compare writes it again."""
    try:
        write_shared_view(client, experiment_id)
    except MlflowException as exc:
        from pipelines.console import errors

        errors.print(f"warning: the MLflow UI's comparison view was not updated: {exc.message}")


def shared_views(tracking_uri: str) -> list[tuple[str, str]]:
    """(name, id) of every experiment with this view, for `forecast ui` to list before it starts.
    A local SQLite file that does not exist yet is not created here (the UI will)."""
    if missing_sqlite_store(tracking_uri) is not None:
        return []
    experiments = mlflow.MlflowClient(tracking_uri).search_experiments()
    return [(e.name, e.experiment_id) for e in experiments if TAG_PREFIX + SHARE_KEY in e.tags]
