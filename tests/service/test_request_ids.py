"""Request ids: what the forecast log and X-Request-Id key on must not repeat, across threads or
processes (workers are forked or spawned, and each must draw its own prefix)."""

from __future__ import annotations

import multiprocessing
import re
from concurrent.futures import ThreadPoolExecutor

from service.request_ids import next_request_id


def test_ids_are_32_hex_digits_and_never_repeat_across_threads():
    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(lambda _: next_request_id(), range(20_000)))
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def child_ids(connection) -> None:
    connection.send([next_request_id() for _ in range(3)])


def test_a_forked_worker_draws_its_own_prefix():
    parent = next_request_id()
    receiver, sender = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=child_ids, args=(sender,))
    child.start()
    ids = receiver.recv()
    child.join(10)
    assert child.exitcode == 0
    assert {i[:16] for i in ids} != {parent[:16]}
    assert parent not in ids
