"""/docs works offline: Swagger UI's assets come from an installed package (fastapi-offline), not a
CDN. The browser test renders the page in headless Chromium with every host name unresolvable; it
also catches a Swagger UI too old for FastAPI's OpenAPI 3.1 ("Unable to render this definition"),
as swagger-ui-bundle's 4.15.5 is."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.docs import mount_offline_docs

DUMMY_PATH = "/v1/dummy-echo"
CONTENT_TYPES = {
    ".js": {"text/javascript", "application/javascript"},
    ".css": {"text/css"},
    ".png": {"image/png"},
}


def make_app() -> FastAPI:
    app = FastAPI(title="Docs test", docs_url=None, redoc_url=None)

    @app.get(DUMMY_PATH)
    def dummy_echo(text: str = "hi") -> dict[str, str]:
        return {"text": text}

    mount_offline_docs(app)
    return app


class AssetLinks(HTMLParser):
    """Collects <script src> and <link href>."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script" and values.get("src"):
            self.scripts.append(values["src"])
        elif tag == "link" and values.get("href"):
            self.links.append(values["href"])


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(make_app()) as test_client:
        yield test_client


def asset_links(client: TestClient) -> AssetLinks:
    response = client.get("/docs")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    parser = AssetLinks()
    parser.feed(response.text)
    return parser


def test_docs_reference_no_remote_assets(client):
    links = asset_links(client)
    assert links.scripts and links.links, "found no <script src> or <link href> in /docs"
    for url in [*links.scripts, *links.links]:
        assert urlsplit(url).scheme not in {"http", "https"} and not url.startswith("//"), url
    assert any(url.endswith("swagger-ui-bundle.js") for url in links.scripts)
    assert any(url.endswith("swagger-ui.css") for url in links.links)


def test_every_local_asset_is_served(client):
    links = asset_links(client)
    for url in [*links.scripts, *links.links]:
        response = client.get(url)
        assert response.status_code == 200, url
        suffix = url[url.rindex(".") :]
        content_type = response.headers["content-type"].split(";")[0].strip()
        assert content_type in CONTENT_TYPES[suffix], (url, content_type)
        assert len(response.content) > 500, (url, len(response.content))
    bundle = client.get(next(u for u in links.scripts if u.endswith("swagger-ui-bundle.js")))
    assert len(bundle.content) > 500_000 and b"SwaggerUIBundle" in bundle.content


def test_oauth2_redirect_and_schema(client):
    redirect = client.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200 and "oauth2" in redirect.text.lower()
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths) == {DUMMY_PATH}, "docs routes must stay out of the schema"
    assert client.get("/redoc").status_code == 404


def test_honours_root_path():
    with TestClient(make_app(), root_path="/api") as prefixed:
        text = prefixed.get("/docs").text
    assert "/api/docs-assets/swagger-ui-bundle.js" in text and "'/api/openapi.json'" in text


@pytest.fixture
def live_server() -> Iterator[str]:
    """The app under a real uvicorn on a free 127.0.0.1 port, in a background thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


def test_swagger_renders_in_a_browser_without_network(live_server, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        # every host name fails to resolve: only the 127.0.0.1 server is reachable
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--virtual-time-budget=5000",
        "--dump-dom",
        f"{live_server}/docs",
    ]
    # a headless chromium start-up took over 30 s once on a loaded 2-core machine (the full suite)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    dom = done.stdout
    assert 'id="swagger-ui"' in dom, f"chromium rc={done.returncode}: {done.stderr[-2000:]}"
    assert "Unable to render this definition" not in dom, "this Swagger UI cannot read OpenAPI 3.1"
    assert "opblock" in dom and DUMMY_PATH in dom, (
        f"Swagger UI did not render the operation; DOM tail: {dom[-2000:]}"
    )
