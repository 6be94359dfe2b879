"""Real server processes for tests: an `mlflow server`, an `mlflow models serve`, the API."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port


def post_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait_for(url: str, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


class ServerURL(str):
    """The base URL a server answers on (a plain ``str`` to callers), with its process id in ``pid``
    for callers that watch the process (the soak benchmark samples its memory)."""

    pid: int

    def __new__(cls, url: str, pid: int) -> ServerURL:
        instance = super().__new__(cls, url)
        instance.pid = pid
        return instance


@contextlib.contextmanager
def running(
    command: list[str], health_url: str, log: Path, env: dict | None = None
) -> Iterator[subprocess.Popen]:
    """Runs ``command`` until the block ends; yields the process once ``health_url`` answers 200."""
    bin_dir = str(Path(sys.executable).parent)
    environment = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}", **(env or {})}
    with log.open("w") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        try:
            wait_for(health_url, process)
            yield process
        except Exception:
            output.flush()
            print(log.read_text()[-4000:])
            raise
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


@contextlib.contextmanager
def mlflow_server(
    workdir: Path, backend_store_uri: str | None = None, port: int | None = None
) -> Iterator[str]:
    """`mlflow server` on loopback, serving its own artifacts from ``workdir``/artifacts; the same
    ``workdir`` and ``port`` again give the same server after a restart."""
    port = port or free_port()
    backend = backend_store_uri or f"sqlite:///{workdir / 'server.db'}"
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        backend,
        "--serve-artifacts",
        "--artifacts-destination",
        str(workdir / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    url = f"http://127.0.0.1:{port}"
    with running(command, f"{url}/health", workdir / "mlflow-server.log"):
        yield url


@contextlib.contextmanager
def prediction_service(
    workdir: Path,
    tracking_uri: str,
    model_uri: str,
    env: dict | None = None,
    quiet: bool = False,
    workers: int = 1,
) -> Iterator[ServerURL]:
    """This project's API (`uvicorn --factory service.main:create_app`, ``workers`` processes sharing their metrics)
    on loopback, ready (a model loaded); the yielded URL's ``pid`` is the uvicorn process."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "service.main:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if quiet:
        command += ["--log-level", "warning", "--no-access-log"]
    shared = {}
    if workers > 1:
        command += ["--workers", str(workers)]
        metrics_dir = workdir / f"metrics-{port}"
        metrics_dir.mkdir(parents=True, exist_ok=True)
        shared = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    settings = {
        **shared,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "MODEL_URI": model_uri,
        "RELOAD_INTERVAL_S": "0",
        **(env or {}),
    }
    url = f"http://127.0.0.1:{port}"
    with running(command, f"{url}/readyz", workdir / "api.log", env=settings) as process:
        yield ServerURL(url, process.pid)


@contextlib.contextmanager
def mlflow_model_server(
    workdir: Path, tracking_uri: str, model_uri: str, env: dict | None = None
) -> Iterator[ServerURL]:
    """`mlflow models serve --env-manager local` on loopback, answering /ping; the yielded URL's
    ``pid`` is the `mlflow` CLI process (its uvicorn runs in the same process group)."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "models",
        "serve",
        "-m",
        model_uri,
        "--env-manager",
        "local",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    url = f"http://127.0.0.1:{port}"
    with running(
        command,
        f"{url}/ping",
        workdir / "mlflow-serve.log",
        env={"MLFLOW_TRACKING_URI": tracking_uri, **(env or {})},
    ) as process:
        yield ServerURL(url, process.pid)
