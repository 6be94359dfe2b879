"""benchmarks/loadgen.py, the GPU check's load generator, against a real HTTP/1.1 server on
loopback: it counts every answer by status inside the measured window only, times them, reads
fixed-length and chunked bodies, reopens connections the server closes, and counts refusals as
errors rather than answers."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import threading
from collections.abc import Iterator

from tests.conftest import REPO, free_port

sys.path.insert(0, str(REPO / "benchmarks"))

import loadgen  # noqa: E402

ANSWER = b'{"forecasts": []}'


@contextlib.contextmanager
def tiny_server(status: int = 200, close: bool = False, chunked: bool = False) -> Iterator[str]:
    """An HTTP/1.1 server on its own event loop in a thread: reads each request's head and body,
    answers ``status`` with a fixed body (chunked if asked), and closes after each answer if asked."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                if chunked:
                    headers, body = (
                        b"Transfer-Encoding: chunked\r\n",
                        b"%x\r\n%s\r\n0\r\n\r\n" % (len(ANSWER), ANSWER),
                    )
                else:
                    headers, body = b"Content-Length: %d\r\n" % len(ANSWER), ANSWER
                if close:
                    headers += b"Connection: close\r\n"
                writer.write(b"HTTP/1.1 %d Status\r\n%s\r\n%s" % (status, headers, body))
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1/predict"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        # the handlers still waiting on a kept connection end here, and the loop is closed: left
        # open, its garbage collection warns later, inside whichever test runs then
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()

        async def finished() -> None:
            await asyncio.gather(*pending, return_exceptions=True)

        loop.run_until_complete(finished())
        loop.close()


def test_answers_on_kept_connections_are_counted_and_timed():
    with tiny_server() as url:
        result = loadgen.run(url, b'{"series": []}', connections=4, seconds=0.5, warmup=0.1)
    assert result.requests > 0 and result.statuses == {"200": result.requests}
    assert result.errors == {"connect": 0, "read": 0, "timeout": 0} and result.failures == 0
    latency = result.latency_ms
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    assert result.rps == result.requests / 0.5 and result.client_cpu_us_per_request > 0


def test_closed_connections_are_reopened_and_chunked_error_answers_are_failures():
    with tiny_server(status=503, close=True, chunked=True) as url:
        result = loadgen.run(url, b"{}", connections=2, seconds=0.5)
    assert result.requests > 0 and result.statuses == {"503": result.requests}
    assert result.failures == result.requests and not any(result.errors.values())


def test_a_refused_connection_is_an_error_not_an_answer():
    url = f"http://127.0.0.1:{free_port()}/v1/predict"  # nothing listens there
    result = loadgen.run(url, b"{}", connections=1, seconds=0.2)
    assert result.requests == 0 and result.errors["connect"] > 0 and result.failures > 0
    assert result.client_cpu_us_per_request is None


def test_percentiles_are_nearest_rank():
    ordered = [1.0, 2.0, 3.0, 4.0]
    assert [loadgen.percentile(ordered, q) for q in (25, 50, 99, 100)] == [1.0, 2.0, 4.0, 4.0]
    assert math.isnan(loadgen.percentile([], 50))


def test_bad_input_is_one_line_and_exit_2(capsys):
    assert loadgen.main(["http://10.0.0.1:80/v1/predict", "--lookback", "8"]) == 2
    assert "loopback" in capsys.readouterr().err
    assert loadgen.main(["http://127.0.0.1:80/v1/predict", "--lookback", "8", "--connections", "0"]) == 2
    assert "connections 0" in capsys.readouterr().err
    assert loadgen.main(["http://127.0.0.1:80/", "--body-file", "/nonexistent/body.json"]) == 2
    assert "No such file" in capsys.readouterr().err
