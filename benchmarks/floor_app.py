"""The HTTP floor for `serve_bench.py`: a bare Starlette app whose one POST route at /v1/predict
reads the body, parses it as JSON (`json.loads`, as the API must at the least) and returns a fixed
JSON answer of ``FLOOR_HORIZON`` values (default 24), shaped like the API's. No model, no
validation, no middleware: what the HTTP stack itself allows on this machine.

    FLOOR_HORIZON=24 .venv/bin/python -m uvicorn floor_app:app --app-dir benchmarks \\
        --host 127.0.0.1 --port 8001 --log-level warning --no-access-log

GET /healthz answers 200 (for the benchmark to know it is up).
"""

from __future__ import annotations

import json
import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

HORIZON = int(os.environ.get("FLOOR_HORIZON", "24"))
ANSWER = json.dumps(
    {"horizon": HORIZON, "forecasts": [{"values": [round(10.0 + 0.1 * i, 4) for i in range(HORIZON)]}]}
).encode()


async def predict(request: Request) -> Response:
    try:
        json.loads(await request.body())
    except ValueError:
        return Response(b'{"detail":"body is not JSON"}', status_code=400, media_type="application/json")
    return Response(ANSWER, media_type="application/json")


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


app = Starlette(routes=[Route("/v1/predict", predict, methods=["POST"]), Route("/healthz", healthz)])
