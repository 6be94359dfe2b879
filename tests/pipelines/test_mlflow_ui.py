"""What a user sees in the MLflow UI (a real `mlflow server`, headless Chromium through Selenium and the
system chromedriver): from the experiment's link, two clicks reach the run that carries the model's and
the naive baseline's test MAE, and its forecast plot and attention heat map open."""

from __future__ import annotations

import shutil
import time

import mlflow
import pytest

from tests.conftest import FAMILIES
from tests.pipelines.helpers import train_json
from tests.servers import mlflow_server

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def browser():
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "chromium/chromedriver are not installed (apt-get install chromium chromium-driver; .ci/run does it)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the dev extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def visible_text(driver, *expected: str, timeout: float = 60.0) -> str:
    """The page's rendered text once every ``expected`` string shows in it."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = driver.find_element(By.TAG_NAME, "body").text
        if all(e in text for e in expected):
            return text
        time.sleep(0.5)
    missing = [e for e in expected if e not in text]
    raise AssertionError(f"{missing} not shown at {driver.current_url}; the page shows:\n{text[:3000]}")


def click(driver, xpath: str, timeout: float = 60.0) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        expected_conditions.element_to_be_clickable((By.XPATH, xpath))
    ).click()


def shown_image(driver, name: str, before: str = "", timeout: float = 60.0) -> str:
    """The source of the decoded image (over 200 px wide, not ``before``) the artifact viewer shows
    once ``name`` is clicked in the artifact tree."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = """return Array.from(document.images)
        .filter(i => i.complete && i.naturalWidth > 200 && i.src !== arguments[0]).map(i => i.src)[0];"""
    click(driver, f"//*[normalize-space(text())='{name}']")
    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script, before))


def test_comparison_is_two_clicks_from_the_experiment(tmp_path, tracking_uri):
    driver = browser()
    try:
        lstm = train_json(tracking_uri, *FAMILIES["lstm"])
        attention = train_json(tracking_uri, *FAMILIES["seq2seq-attention"])
        client = mlflow.MlflowClient(tracking_uri)
        experiment = client.get_experiment_by_name("forecasting")
        assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
        run = client.get_run(attention["run_id"])
        model = client.get_logged_model(attention["model_uri"].removeprefix("models:/"))
        assert {"test_mae", "naive_test_mae", "selection_mae"} <= {m.key for m in model.metrics}
        test_mae = attention["metrics"]["model"]["mae"]
        naive_mae = attention["metrics"]["naive"]["mae"]
        assert run.data.metrics["naive_test_mae"] == pytest.approx(naive_mae)
        with mlflow_server(tmp_path, backend_store_uri=tracking_uri) as url:
            # The link on MLflow's experiment list, opened in a browser that never chose a view.
            driver.get(f"{url}/#/experiments/{experiment.experiment_id}")
            click(driver, "//*[normalize-space(text())='Model training']")  # 1
            visible_text(driver, client.get_run(lstm["run_id"]).info.run_name, run.info.run_name)
            click(driver, f"//a[normalize-space(.)='{run.info.run_name}']")  # 2
            shown = visible_text(driver, "Description", f"test MAE {test_mae:.4f} vs naive {naive_mae:.4f}")
            assert f"selection MAE {attention['selection_metrics']['model']['mae']:.4f}" in shown
            # the metrics table on the same page, numbers as the UI formats them
            assert "naive_test_mae" in shown and "test_mae" in shown
            click(driver, "//*[normalize-space(text())='Artifacts']")
            click(driver, "//*[normalize-space(text())='plots']")
            forecast_plot = shown_image(driver, "forecast_vs_actual.png")
            shown_image(driver, "attention.png", before=forecast_plot)
    finally:
        driver.quit()
