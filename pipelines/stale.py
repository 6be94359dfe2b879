"""Runs left RUNNING by a process that died without a word (SIGKILL, OOM killer, power loss).

A training run tags its host and pid at start and a heartbeat with each checkpoint
(pipelines/resume.py). It is stale when its process is gone from this host, or, trained
elsewhere, when it has not checkpointed for longer than a threshold."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import mlflow
from mlflow.entities import Run

HOST_TAG = "forecast.host"
PID_TAG = "forecast.pid"
PID_START_TAG = "forecast.pid_start"  # the process's start time, so a reused pid is not taken for it
HEARTBEAT_TAG = "forecast.heartbeat"  # unix seconds of the start or the latest checkpoint
DEFAULT_MAX_SILENCE_S = 3600.0


@dataclass
class StaleRun:
    run_id: str
    run_name: str
    experiment_id: str
    reason: str


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def process_start(pid: int) -> str | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22): with the pid
    it names one process for the life of the machine. None without /proc (not Linux) or process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]  # fields after "(comm)" start at field 3


def stale_reason(
    run: Run, max_silence_s: float = DEFAULT_MAX_SILENCE_S, now: float | None = None
) -> str | None:
    """Why a RUNNING run is considered dead, or None if it may still be training."""
    tags = run.data.tags
    host, pid = tags.get(HOST_TAG), tags.get(PID_TAG)
    if host == socket.gethostname() and pid and pid.isdigit():
        if not process_alive(int(pid)):
            return f"its process {pid} on {host} is gone"
        started = tags.get(PID_START_TAG)
        if started and process_start(int(pid)) not in (None, started):
            return f"its process {pid} on {host} is gone (the pid now belongs to another process)"
        return None
    heartbeat = float(tags.get(HEARTBEAT_TAG) or run.info.start_time / 1000)
    silent = (time.time() if now is None else now) - heartbeat
    if silent > max_silence_s:
        return f"no checkpoint for {silent / 60:.0f} min"
    return None


def search_running(client: mlflow.MlflowClient, experiment_ids: list[str]) -> list[Run]:
    if not experiment_ids:
        return []
    query = "attributes.status = 'RUNNING' and tags.role = 'model'"
    return client.search_runs(experiment_ids, query, max_results=1000)


def described(run: Run, reason: str) -> StaleRun:
    name = run.data.tags.get("mlflow.runName", "")
    return StaleRun(run.info.run_id, name, run.info.experiment_id, reason)


def running_runs(client: mlflow.MlflowClient, experiment_ids: list[str]) -> list[StaleRun]:
    """Every model run marked RUNNING, stale or not (the reason says which)."""
    return [described(r, stale_reason(r) or "RUNNING") for r in search_running(client, experiment_ids)]


def find_stale_runs(
    client: mlflow.MlflowClient, experiment_ids: list[str], max_silence_s: float = DEFAULT_MAX_SILENCE_S
) -> list[StaleRun]:
    found = []
    for run in search_running(client, experiment_ids):
        reason = stale_reason(run, max_silence_s)
        if reason is not None:
            found.append(described(run, reason))
    return found


def mark_killed(client: mlflow.MlflowClient, runs: list[StaleRun]) -> None:
    for run in runs:
        client.set_terminated(run.run_id, "KILLED")


def warning_line(runs: list[StaleRun]) -> str:
    """The one line `forecast train` prints when its experiment holds stale runs."""
    first = runs[0]
    more = f" (and {len(runs) - 1} more: `forecast runs --stale`)" if len(runs) > 1 else ""
    return (
        f"warning: run {first.run_id} ({first.run_name}) was left RUNNING, {first.reason}; "
        f"continue it with `forecast train --resume {first.run_id}`{more}"
    )
