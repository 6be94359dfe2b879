"""Swagger UI at /docs that works without internet: its JS, CSS and favicon are served from an
installed package instead of FastAPI's default CDN (jsdelivr), which leaves the page blank on a
machine that cannot reach it.

The assets come from `fastapi-offline` (MIT; Swagger UI 5.x; it needs nothing but FastAPI). Only its
static folder is used, not its app factory. Not `swagger-ui-bundle`: its newest release (1.1.0)
ships Swagger UI 4.15.5, which cannot render the OpenAPI 3.1 documents FastAPI writes ("Unable to
render this definition"); tests/service/test_docs.py renders the page in a browser to catch that."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"
DOCS_PATH = "/docs"
ASSETS_DIR = Path(
    str(files("fastapi_offline") / "static")
)  # swagger-ui-bundle.js, swagger-ui.css, favicon.png


def mount_offline_docs(app: FastAPI) -> None:
    """Serve Swagger UI at ``/docs`` with its assets from the installed `fastapi-offline` package.

    Create the app with FastAPI's own docs turned off, then call this once::

        app = FastAPI(docs_url=None, redoc_url=None, ...)
        mount_offline_docs(app)

    (With ``docs_url`` left at its default, FastAPI's CDN-backed /docs would be registered first
    and win.) This mounts the assets at ``/docs-assets`` and adds ``GET /docs`` plus the OAuth2
    redirect page FastAPI normally adds (``app.swagger_ui_oauth2_redirect_url``, by default
    ``/docs/oauth2-redirect``), all with ``include_in_schema=False``. Like FastAPI's own docs, it
    honours ``root_path`` (behind a proxy under a prefix), ``swagger_ui_parameters`` and
    ``swagger_ui_init_oauth``; it does nothing when the app has no OpenAPI schema
    (``openapi_url=None``).
    """
    if not app.openapi_url:
        return
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    oauth2_redirect = app.swagger_ui_oauth2_redirect_url

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=root + app.openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=root + oauth2_redirect if oauth2_redirect else None,
            init_oauth=app.swagger_ui_init_oauth,
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    app.add_route(DOCS_PATH, swagger_ui, include_in_schema=False)

    if oauth2_redirect:

        async def swagger_ui_redirect(request: Request) -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

        app.add_route(oauth2_redirect, swagger_ui_redirect, include_in_schema=False)
