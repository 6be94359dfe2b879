"""Real server processes for tests: an `mlflow server`, an `mlflow models serve`, the API."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port


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


@contextlib.contextmanager
def running(command: list[str], health_url: str, log: Path, env: dict | None = None) -> Iterator[None]:
    bin_dir = str(Path(sys.executable).parent)
    environment = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}", **(env or {})}
    with log.open("w") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        try:
            wait_for(health_url, process)
            yield
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
def mlflow_server(workdir: Path, backend_store_uri: str | None = None) -> Iterator[str]:
    """`mlflow server` on loopback, serving its own artifacts from ``workdir``/artifacts."""
    port = free_port()
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
