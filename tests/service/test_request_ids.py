"""Request ids: what the forecast log and X-Request-Id key on must not repeat, across threads or
processes (workers are forked or spawned, and each must draw its own prefix)."""

from __future__ import annotations

import multiprocessing
import re
from concurrent.futures import ThreadPoolExecutor

from service.request_ids import next_request_id


def test_ids_are_32_hex_digits_and_never_repeat_across_threads():
    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(lambda _: next_request_id(), range(20_000)))  # several buffer reads
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def test_consecutive_ids_share_no_prefix_a_client_could_count_with():
    """An id must not tell a client which worker answered or how many requests it logged."""
    first, second = next_request_id(), next_request_id()
    assert first[:8] != second[:8]
    assert int(second, 16) - int(first, 16) not in (1, -1)


def child_ids(connection) -> None:
    connection.send([next_request_id() for _ in range(3)])


def test_a_forked_worker_does_not_repeat_the_ids_it_inherited():
    parent = next_request_id()
    receiver, sender = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=child_ids, args=(sender,))
    child.start()
    ids = receiver.recv()
    child.join(10)
    assert child.exitcode == 0
    assert parent not in ids
    assert not set(ids) & {next_request_id() for _ in range(3)}  # the parent's next ids differ too
