"""`forecast serve --workers 2`: two processes answer, and /metrics (answered by either) adds up
both workers' counts (prometheus-client's multiprocess mode), instead of each reporting its own."""

from __future__ import annotations

import re
import sys
import time

import httpx
import pytest

from tests.conftest import free_port
from tests.servers import running
from tests.service.test_http import window

BODY = {"series": [{"values": window(14)}]}
PREDICT_OK = 'forecast_http_requests_total{route="/v1/predict",status="200"}'
VERSION = re.compile(r'^forecast_model_version\{.*pid="(\d+)".*\}', re.MULTILINE)


def scrape(url: str) -> str:
    """/metrics on a fresh connection, so either worker may answer."""
    return httpx.get(f"{url}/metrics", headers={"Connection": "close"}, timeout=10).text


def counted(text: str, sample: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(sample + " ")]
    return float(lines[0].split()[-1]) if lines else 0.0


@pytest.mark.slow
def test_two_workers_serve_and_metrics_add_up_across_them(model_store, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "pipelines.cli", "serve", "--workers", "2", "--port", str(port)]
    command += ["--model-uri", "models:/svc-lstm@champion", "--tracking-uri", model_store]
    env = {"RELOAD_INTERVAL_S": "0", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    with running(command, f"{url}/healthz", tmp_path / "api.log", env=env) as process:
        deadline = time.monotonic() + 120
        while len(set(VERSION.findall(scrape(url)))) < 2:  # each worker loaded the model
            assert time.monotonic() < deadline, scrape(url)
            time.sleep(0.5)
        workers = set(VERSION.findall(scrape(url)))
        assert process.pid not in {int(pid) for pid in workers}  # the parent only supervises

        for _ in range(40):
            answer = httpx.post(f"{url}/v1/predict", json=BODY, headers={"Connection": "close"}, timeout=30)
            assert answer.status_code == 200, answer.text

        scrapes = [scrape(url) for _ in range(8)]
    assert [counted(text, PREDICT_OK) for text in scrapes] == [40.0] * 8
    assert all(counted(text, "forecast_batch_windows_count") >= 1 for text in scrapes)
    assert (tmp_path / "metrics").is_dir()
