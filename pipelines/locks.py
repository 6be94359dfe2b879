"""Locks on the tracking backend's own primitives: one promotion of a registered model at a time
(two trainers promoting at once take turns, so the second compares its candidate with whatever the
first left and the worse one cannot win), and one process training a run at a time (a second
``forecast train --resume`` of a run being trained is refused). Each backend has a primitive:

- PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on the tracking database, keyed
  by what is locked. The server holds it, and frees it when the holder's connection ends, a
  killed process included.
- SQLite, or a local ``file:`` store: a file lock (``flock``, through ``filelock``) beside the store.
  Such a store lives on one machine, and the kernel frees the lock with its holder.
- Anything else (an MLflow tracking server over HTTP, another database): a lease written as a tag
  of the registered model or the run, the one thing every backend offers. The holder renews it while it
  works; a waiter takes a lease over only after seeing the same value unchanged for
  ``LEASE_S`` by its own clock, so no two machines' clocks are compared, and a tag it cannot
  read (malformed, written by hand) is just such a value. A tag lease is not exclusive if a
  writer stalls longer than ``SETTLE_S`` between writing and reading back: that is the price of
  an HTTP server that has no lock to offer, and why the others use theirs.

Waiting is bounded (``wait_s``); every failure is a ``LockError`` naming what is locked."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import mlflow
from filelock import FileLock
from filelock import Timeout as FileLockTimeout
from mlflow.exceptions import MlflowException
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from forecaster.errors import ForecasterError
from forecaster.redaction import redact

TAG = "promotion.lock"  # a registered model's lease
RUN_TAG = "training.lock"  # a run's lease
WAIT_S = 900.0  # how long a promotion waits for another one of the same model
POLL_S = 0.2
LEASE_S = 120.0  # a tag lease seen unchanged this long is taken over (its holder died)
RENEW_S = 20.0  # a tag lease's holder rewrites it this often
SETTLE_S = 0.5  # after writing a tag lease, wait this long before reading it back


class LockError(ForecasterError):
    """A lock could not be taken."""


Lock = AbstractContextManager[str]


@dataclass(frozen=True)
class Tag:
    """Where a lease lives on a backend without a lock: read, write and delete one tag."""

    read: Callable[[], str | None]
    write: Callable[[str], None]
    delete: Callable[[], None]


def promotion_lock(name: str, tracking_uri: str | None = None, wait_s: float = WAIT_S) -> Lock:
    """Hold the lock on promoting registered model ``name``; yields which kind of lock it is."""
    tag = model_tag(mlflow.MlflowClient(tracking_uri), name)
    return backend_lock(f"promotion of {name!r}", f"promotion:{name}", tag, tracking_uri, wait_s)


def run_lock(run_id: str, tracking_uri: str | None = None, wait_s: float = 0.0) -> Lock:
    """Hold the lock on training run ``run_id`` (by default refused at once if another holds it;
    on a tag lease, a dead holder's lease is taken over only with ``wait_s`` > LEASE_S)."""
    tag = run_tag(mlflow.MlflowClient(tracking_uri), run_id)
    return backend_lock(f"training of run {run_id}", f"run:{run_id}", tag, tracking_uri, wait_s)


def model_tag(client: mlflow.MlflowClient, name: str) -> Tag:
    return Tag(
        read=lambda: client.get_registered_model(name).tags.get(TAG),
        write=lambda value: client.set_registered_model_tag(name, TAG, value),
        delete=lambda: client.delete_registered_model_tag(name, TAG),
    )


def run_tag(client: mlflow.MlflowClient, run_id: str) -> Tag:
    return Tag(
        read=lambda: client.get_run(run_id).data.tags.get(RUN_TAG),
        write=lambda value: client.set_tag(run_id, RUN_TAG, value),
        delete=lambda: client.delete_tag(run_id, RUN_TAG),
    )


@contextlib.contextmanager
def backend_lock(what: str, key: str, tag: Tag, tracking_uri: str | None, wait_s: float) -> Iterator[str]:
    uri = tracking_uri or mlflow.get_tracking_uri()
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    if scheme.startswith("postgresql"):
        lock = advisory_lock(uri, what, key, wait_s)
    elif not uses_tag_lease(uri):
        lock = file_lock(store_directory(uri), what, key, wait_s)
    else:
        lock = tag_lease(tag, what, wait_s)
    with lock as kind:
        yield kind


def database_lock(url: str, what: str, key: str, wait_s: float = WAIT_S) -> Lock:
    """A lock in (or beside) a database given by its URL: PostgreSQL's advisory lock, a file
    lock beside SQLite; other databases get none."""
    if url.lower().startswith("postgresql"):
        return advisory_lock(url, what, key, wait_s)
    if url.lower().startswith("sqlite"):
        return file_lock(store_directory(url), what, key, wait_s)
    return contextlib.nullcontext("no lock")


def uses_tag_lease(tracking_uri: str | None) -> bool:
    """True for a store with no lock of its own to offer (an HTTP server, another database)."""
    uri = tracking_uri or mlflow.get_tracking_uri()
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    return not (scheme.startswith("postgresql") or scheme in ("sqlite", "file", "") or len(scheme) == 1)


def lock_key(key: str) -> str:
    return hashlib.sha256(f"forecast:{key}".encode()).hexdigest()


# -- PostgreSQL ---------------------------------------------------------------------------------
@contextlib.contextmanager
def advisory_lock(uri: str, what: str, key: str, wait_s: float) -> Iterator[str]:
    url = make_url(uri)
    if url.drivername == "postgresql":  # psycopg 3, which we ship, whatever SQLAlchemy's default
        url = url.set(drivername="postgresql+psycopg")
    number = int(lock_key(key)[:15], 16)  # a bigint
    engine = create_engine(url, poolclass=NullPool)
    try:
        connection = engine.connect()
        try:
            deadline = time.monotonic() + wait_s
            while not connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": number}).scalar():
                connection.rollback()
                if time.monotonic() > deadline:
                    raise LockError(f"another {what} holds its lock{waited(wait_s)}")
                time.sleep(POLL_S)
            connection.commit()
        except BaseException:
            connection.close()
            raise
    except (SQLAlchemyError, ArgumentError) as exc:
        engine.dispose()
        why = redact(str(exc).splitlines()[0])
        raise LockError(f"cannot take the lock of the {what} on the tracking database: {why}") from None
    try:
        yield "postgresql advisory lock"
    finally:
        connection.close()  # the server frees a session's advisory locks as the session ends
        engine.dispose()


# -- SQLite or a local file store ---------------------------------------------------------------
def store_directory(uri: str) -> Path:
    """The folder of a local store: the SQLite file's, or the ``file:`` store itself."""
    if uri.lower().startswith("sqlite"):
        database = make_url(uri).database
        if not database or database == ":memory:":
            raise LockError(f"an in-memory SQLite tracking store cannot be shared: {uri}")
        return Path(database).resolve().parent
    path = uri.split("file:", 1)[-1] if uri.lower().startswith("file:") else uri
    return Path(path.removeprefix("//") or ".").resolve()


@contextlib.contextmanager
def file_lock(directory: Path, what: str, key: str, wait_s: float) -> Iterator[str]:
    path = directory / f".forecast-{lock_key(key)[:16]}.lock"
    lock = FileLock(path, timeout=wait_s)
    try:
        lock.acquire(poll_interval=POLL_S)
    except FileLockTimeout:
        raise LockError(f"another {what} holds its lock ({path}){waited(wait_s)}") from None
    except OSError as exc:
        raise LockError(f"cannot take the lock of the {what} ({path}): {exc}") from None
    try:
        yield f"file lock {path}"
    finally:
        lock.release()


# -- a tag lease (a tracking server over HTTP) ------------------------------------------------------
@contextlib.contextmanager
def tag_lease(tag: Tag, what: str, wait_s: float) -> Iterator[str]:
    token = uuid.uuid4().hex
    try:
        acquire_lease(tag, what, token, wait_s)
    except MlflowException as exc:
        raise LockError(f"cannot take the lease of the {what}: {exc.message}") from None
    stop = threading.Event()
    renewer = threading.Thread(target=renew_lease, args=(tag, token, stop), daemon=True)
    renewer.start()
    try:
        yield "tag lease"
    finally:
        stop.set()
        renewer.join()
        with contextlib.suppress(MlflowException):
            if is_ours(tag.read(), token):
                tag.delete()


def acquire_lease(tag: Tag, what: str, token: str, wait_s: float) -> None:
    """A lease seen unchanged for LEASE_S is its dead holder's: a live one renews it. So taking a
    dead holder's lease needs a ``wait_s`` of more than LEASE_S."""
    deadline = time.monotonic() + wait_s
    seen, seen_since = None, time.monotonic()
    while True:
        held = tag.read()
        if held != seen:
            seen, seen_since = held, time.monotonic()
        if held is None or time.monotonic() - seen_since > LEASE_S:  # free, or its holder stopped renewing
            tag.write(f"{token} 0")
            time.sleep(SETTLE_S)
            if is_ours(tag.read(), token):
                return
        if time.monotonic() > deadline:
            raise LockError(f"another {what} holds its lease{waited(wait_s)}")
        time.sleep(SETTLE_S)


def renew_lease(tag: Tag, token: str, stop: threading.Event) -> None:
    """Rewrite the lease with a new count every RENEW_S, so waiters see it alive."""
    count = 0
    while not stop.wait(RENEW_S):
        count += 1
        with contextlib.suppress(MlflowException):
            tag.write(f"{token} {count}")


def is_ours(held: str | None, token: str) -> bool:
    return held is not None and held.split(" ", 1)[0] == token


def waited(wait_s: float) -> str:
    return f" (waited {wait_s:.0f} s)" if wait_s >= 1 else ""
