"""A request sent byte for byte over a socket (a chunked body, a body that stalls, one declared
larger than it is), for what an HTTP client library would not send."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from urllib.parse import urlparse


def exchange(
    url: str, head: str, parts: Sequence[bytes] = (), timeout: float = 30.0
) -> tuple[int, dict, bytes]:
    """Send a request byte for byte; (status, lower-case headers, body) of the answer. The answer
    is read until its Content-Length is in, however long the server takes (up to ``timeout``)."""
    address = urlparse(url)
    with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
        sock.sendall(head.encode())
        for part in parts:
            try:
                sock.sendall(part)
            except (BrokenPipeError, ConnectionResetError):  # answered already, and hung up
                break
        response = b""
        while b"\r\n\r\n" not in response or len(response.partition(b"\r\n\r\n")[2]) < length(response):
            chunk = sock.recv(65536)
            if not chunk:
                break
            response += chunk
    top, _, body = response.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    headers = dict(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in lines[1:])
    )
    return int(lines[0].split(" ", 2)[1]), headers, body


def length(response: bytes) -> int:
    for line in response.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return int(value)
    return 0
