"""Request ids for the forecast log and the X-Request-Id header: 32 random hex digits.

Why not uuid4: it reads the OS's random source per call, 12 us of a logged request's event-loop
time under load (py-spy), a fifth of what the log costs the request path. The ids are cut from
one read of 64 KiB instead (4,096 ids), so they cost next to nothing and stay unguessable: a
prefix and a counter would tell any client which worker answered it and how many requests that
worker logged before. A forked child drops the buffer it inherited (it would repeat the parent's
ids)."""

from __future__ import annotations

import os
import threading

ID_BYTES = 16


class RequestIds:
    def __init__(self, per_read: int = 4096) -> None:
        self.per_read = per_read
        self.renew()
        os.register_at_fork(after_in_child=self.renew)

    def renew(self) -> None:
        # the event loop and the shadow's thread may both ask; a fresh lock after a fork (one
        # held by another thread at the fork would stay held)
        self.lock = threading.Lock()
        self.digits = ""
        self.position = 0

    def next(self) -> str:
        with self.lock:
            if self.position >= len(self.digits):
                self.digits = os.urandom(ID_BYTES * self.per_read).hex()
                self.position = 0
            start = self.position
            self.position += 2 * ID_BYTES
            return self.digits[start : self.position]


_ids = RequestIds()


def next_request_id() -> str:
    return _ids.next()
