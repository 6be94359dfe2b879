"""Locks on the tracking backend's own primitives: one promotion of a registered model at a time
(two trainers promoting at once take turns, so the second compares its candidate with whatever the
first left and the worse one cannot win), and one process training a run at a time (a second
``forecast train --resume`` of a run being trained is refused). Each backend has a primitive:

- PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on the tracking database, keyed
  by what is locked. The server holds it, and frees it when the holder's connection ends, a
  killed process included (TCP keepalives notice a lost machine in about a minute). It needs a
  session of its own: not through PgBouncer in transaction mode.
- SQLite, or a local ``file:`` store: a file lock (``flock``, through ``filelock``) in the folder
  ``.forecast-locks`` beside the store (its files stay; only the kernel's lock comes and goes).
  Such a store lives on one machine, and the kernel frees the lock with its holder.
- Anything else (an MLflow tracking server over HTTP, another database): a lease written as a tag
  of the registered model or the run, the one thing every backend offers. The holder renews it while it
  works; a waiter takes a lease over only after seeing the same value unchanged for
  ``LEASE_S`` by its own clock, so no two machines' clocks are compared, and a tag it cannot
  read (malformed, written by hand) is just such a value. The renewer rewrites the lease only
  while it still reads its own token; a holder that lost it (the server unreachable for longer
  than LEASE_S, another writer took it) says so as it ends. A tag lease is not exclusive if a
  writer stalls longer than ``SETTLE_S`` between reading the lease free and reading back its
  own: that is the price of an HTTP server that has no lock to offer, and why the others use theirs.

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
from sqlalchemy import create_engine, text
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from forecaster.errors import ForecasterError
from infra.database_urls import is_postgresql, sqlalchemy_url, sqlite_file
from infra.redaction import redact

TAG = "promotion.lock"  # a registered model's lease
RUN_TAG = "training.lock"  # a run's lease
WAIT_S = 900.0  # how long a promotion waits for another one of the same model
POLL_S = 0.2
LEASE_S = 120.0  # a tag lease seen unchanged this long is taken over (its holder died)
RENEW_S = 20.0  # a tag lease's holder rewrites it this often
SETTLE_S = 3.0  # after writing a tag lease, wait this long before reading it back (HTTP round trips)
LEASE_POLL_S = 1.0  # how often a waiter reads a tag lease
RENEWER = "lease-renewer"  # the renewing thread's name


class LockError(ForecasterError):
    """A lock could not be taken (or was lost)."""


class LockHeld(LockError):
    """Another process holds the lock."""


Lock = AbstractContextManager[str]


@dataclass(frozen=True)
class Tag:
    """Where a lease lives on a backend without a lock: read, write and delete one tag."""

    read: Callable[[], str | None]
    write: Callable[[str], object]  # what the client's setter returns is not used
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
    if is_postgresql(url):
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
    number = int(lock_key(key)[:15], 16)  # a bigint
    try:
        url = sqlalchemy_url(uri)
        keepalives = {
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        }
        engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 10, **keepalives})
    except (ArgumentError, ImportError) as exc:
        raise LockError(f"cannot take the lock of the {what}: {redact(str(exc).splitlines()[0])}") from None
    try:
        connection = engine.connect()
        try:
            deadline = time.monotonic() + wait_s
            while not connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": number}).scalar():
                connection.rollback()
                if time.monotonic() > deadline:
                    raise LockHeld(f"another {what} holds its lock{waited(wait_s)}")
                time.sleep(POLL_S)
            connection.commit()
        except BaseException:
            connection.close()
            raise
    except (SQLAlchemyError, ImportError) as exc:
        engine.dispose()
        why = redact(str(exc).splitlines()[0])
        raise LockError(f"cannot take the lock of the {what} in its database: {why}") from None
    try:
        yield "postgresql advisory lock"
    finally:
        connection.close()  # the server frees a session's advisory locks as the session ends
        engine.dispose()


# -- SQLite or a local file store ---------------------------------------------------------------
def store_directory(uri: str) -> Path:
    """The folder of a local store: the SQLite file's, or the ``file:`` store itself."""
    if uri.lower().startswith("sqlite"):
        database = sqlite_file(uri)
        if database is None:
            raise LockError(f"an in-memory SQLite tracking store cannot be shared: {uri}")
        return database.resolve().parent
    path = uri.split("file:", 1)[-1] if uri.lower().startswith("file:") else uri
    return Path(path.removeprefix("//") or ".").resolve()


@contextlib.contextmanager
def file_lock(directory: Path, what: str, key: str, wait_s: float) -> Iterator[str]:
    path = directory / ".forecast-locks" / f"{lock_key(key)[:16]}.lock"
    try:
        path.parent.mkdir(exist_ok=True)
        # a real flock or none: a soft lock's marker file would outlive a crashed holder
        lock = FileLock(path, timeout=wait_s, fallback_to_soft=False)
        lock.acquire(poll_interval=POLL_S)
    except FileLockTimeout:
        raise LockHeld(f"another {what} holds its lock ({path}){waited(wait_s)}") from None
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
    stop, lost = threading.Event(), threading.Event()
    renewer = threading.Thread(target=renew_lease, args=(tag, token, stop, lost), name=RENEWER, daemon=True)
    renewer.start()
    try:
        yield "tag lease"
    finally:
        stop.set()
        renewer.join()
        with contextlib.suppress(Exception):
            if is_ours(tag.read(), token):
                tag.delete()
    if lost.is_set():
        raise LockError(f"the lease of the {what} was lost while it was held (its tag changed hands)")


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
            raise LockHeld(f"another {what} holds its lease{waited(wait_s)}")
        time.sleep(LEASE_POLL_S)


def renew_lease(tag: Tag, token: str, stop: threading.Event, lost: threading.Event) -> None:
    """Every RENEW_S, rewrite the lease with a new count, while it is still ours: a holder whose
    lease another took over stops renewing it and is told (``lost``) instead of fighting for it."""
    count = 0
    while not stop.wait(RENEW_S):
        try:
            if not is_ours(tag.read(), token):
                lost.set()
                return
            count += 1
            tag.write(f"{token} {count}")
        except Exception:  # noqa: BLE001 - unreachable for now: the next round tries again
            continue


def is_ours(held: str | None, token: str) -> bool:
    return held is not None and held.split(" ", 1)[0] == token


def waited(wait_s: float) -> str:
    return f" (waited {wait_s:.0f} s)" if wait_s >= 1 else ""
