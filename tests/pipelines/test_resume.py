"""Training survives a crash: checkpoints are run artifacts, `forecast train --resume RUN_ID`
continues the same run to the very model an uninterrupted run makes, and runs a dead process left
RUNNING are found (`forecast runs --stale`) and named by `forecast train`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
import torch

from pipelines.stale import HOST_TAG, PID_TAG
from tests.conftest import REPO, TINY, empty_tracking_store
from tests.pipelines.helpers import forecast, tiny_settings

# Killed after epoch 2 of 4, the run has epochs to resume. The kill needs no slow epochs to land
# before the end: the process freezes itself at that checkpoint (STOPPING_CLI), whatever the load.
EPOCHS = 4
CRASH_SETTINGS = [
    *(s for s in TINY if not s.startswith("train.epochs")),
    f"train.epochs={EPOCHS}",
    "train.patience=10",
]

# `forecast ARGS...` that freezes itself (SIGSTOP) once it has retagged last.ckpt to the epoch in
# $STOP_AT_EPOCH, before it deletes the last.ckpt that one replaces: the worst moment for a kill
# (a superseded file left behind), and a moment to hold a run while another process asks for it.
# Run as a script, so that DDP's launcher starts rank 1 with the same command line.
STOPPING_CLI = """
import os
import signal

import pipelines.resume as resume
from pipelines.cli import main

superseded = resume.superseded_checkpoints
stop_at = f"{resume.CHECKPOINTS}/epoch-{int(os.environ['STOP_AT_EPOCH']):04d}/{resume.LAST}"


def superseded_then_stop(client, run_id, name, keep):
    if keep == stop_at:
        os.kill(os.getpid(), signal.SIGSTOP)
    return superseded(client, run_id, name, keep)


resume.superseded_checkpoints = superseded_then_stop
main()
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", "train", *args]


def run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    """`forecast train ARGS` as a process of its own (DDP's ranks need one); its JSON outcome."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    result = subprocess.run(cli(*args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def settings(*extra: str) -> list[str]:
    return [arg for item in [*CRASH_SETTINGS, *extra] for arg in ("--set", item)]


def stopping_at_checkpoint(
    tmp_path: Path, epoch: int, name: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """Start `forecast train ARGS` in a process group of its own (STOPPING_CLI), its stdout and
    stderr in ``name``.out and ``name``.err, and return once it froze itself at ``epoch``'s
    checkpoint: waiting on the process's state, not on a clock."""
    script = tmp_path / "stopping_cli.py"
    script.write_text(STOPPING_CLI)
    env = {**os.environ, "PYTHONPATH": str(REPO), "STOP_AT_EPOCH": str(epoch), **(env or {})}
    with open(tmp_path / f"{name}.out", "w") as out, open(tmp_path / f"{name}.err", "w") as err:
        process = subprocess.Popen(
            [sys.executable, str(script), "train", *args],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    deadline = time.monotonic() + 600
    try:
        while True:
            pid, status = os.waitpid(process.pid, os.WUNTRACED | os.WNOHANG)
            if pid and os.WIFSTOPPED(status):
                return process
            stderr = (tmp_path / f"{name}.err").read_text()[-3000:]
            assert not pid, f"training ended before its epoch {epoch} checkpoint: {stderr}"
            assert time.monotonic() < deadline, f"no epoch {epoch} checkpoint in time: {stderr}"
            time.sleep(0.05)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        raise


def kill_after_checkpoint(
    tmp_path: Path, uri: str, epochs_done: int, *args: str, env: dict[str, str] | None = None
) -> str:
    """Start `forecast train` (into the experiment "crash"), SIGKILL its whole process group
    (every DDP rank, as a lost machine would) at the checkpoint of ``epochs_done``, just after the
    run's tag names it and before the file it replaces is deleted; the id of the run it left."""
    process = stopping_at_checkpoint(tmp_path, epochs_done, "killed", *args, env=env)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    client = mlflow.MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("crash").experiment_id])
    return run.info.run_id


def best_weights(client: mlflow.MlflowClient, run_id: str, tmp_path: Path) -> dict[str, torch.Tensor]:
    best = client.get_run(run_id).data.tags["checkpoint.best"]
    path = client.download_artifacts(run_id, best, str(tmp_path / run_id))
    return torch.load(path, weights_only=True)["state_dict"]


def checkpoint_files(client: mlflow.MlflowClient, run_id: str) -> set[str]:
    return {
        f.path
        for folder in client.list_artifacts(run_id, "checkpoints")
        for f in client.list_artifacts(run_id, folder.path)
    }


@pytest.mark.slow
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, monkeypatch):
    """A run SIGKILLed after a checkpoint resumes to the run never interrupted. Two `--resume` of
    it: the first takes the run's lock and trains; the second, asked while the first holds it
    (frozen, so no timing decides), is refused naming it, and the first trains each epoch once."""
    monkeypatch.chdir(tmp_path)  # the in-process reference run's artifacts land beside the others
    uri = empty_tracking_store(tmp_path / "mlflow.db")
    common = ["--experiment", "crash", "--tracking-uri", uri, "--json"]
    run_id = kill_after_checkpoint(tmp_path, uri, 2, *settings(), "--register", "crashy", *common)
    client = mlflow.MlflowClient(uri)
    killed = client.get_run(run_id)
    assert killed.info.status == "RUNNING" and killed.data.tags["checkpoint.epochs"] == "2"
    # the files the tags name are there; killed between retagging epoch 2's last.ckpt and deleting
    # epoch 1's, that one is left too, until the resumed run's next checkpoint (checked below)
    pointed = {killed.data.tags["checkpoint.last"], killed.data.tags["checkpoint.best"]}
    left = checkpoint_files(client, run_id)
    assert pointed < left and {f.rpartition("/")[2] for f in left} <= {"last.ckpt", "best.ckpt"}

    first = stopping_at_checkpoint(tmp_path, 3, "resume", "--resume", run_id, "--tracking-uri", uri, "--json")
    try:
        assert client.get_run(run_id).data.tags[PID_TAG] == str(first.pid)  # it holds the run
        second = forecast("train", "--resume", run_id, "--tracking-uri", uri, "--quiet")
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.exit_code != 0
    refusal = second.stdout + second.stderr
    assert f"another process is training this run: pid {first.pid} on " in refusal, refusal
    assert "since 20" in refusal and "Traceback" not in refusal, refusal
    assert first.wait(timeout=600) == 0, (tmp_path / "resume.err").read_text()[-3000:]
    resumed = json.loads((tmp_path / "resume.out").read_text().strip().splitlines()[-1])
    # the uninterrupted reference, in this process: the same model as the CLI's own process makes
    trained = forecast("train", *settings(), "--experiment", "fresh", "--tracking-uri", uri, "--json")
    assert trained.exit_code == 0, trained.output
    fresh = json.loads(trained.stdout.strip().splitlines()[-1])

    assert resumed["run_id"] == run_id
    runs = client.search_runs([client.get_experiment_by_name("crash").experiment_id], "tags.role = 'model'")
    assert [(r.info.run_id, r.info.status) for r in runs] == [(run_id, "FINISHED")]
    for name in ("val_loss", "train_loss"):  # trained once after the kill: no epoch logged twice
        steps = [m.step for m in client.get_metric_history(run_id, name)]
        assert sorted(steps) == list(range(EPOCHS)), (name, steps)
    lr_steps = [m.step for m in client.get_metric_history(run_id, "lr-AdamW")]  # by global step
    assert len(lr_steps) == len(set(lr_steps)) == EPOCHS
    history = {m.step: m.value for m in client.get_metric_history(run_id, "val_loss")}
    reference = {m.step: m.value for m in client.get_metric_history(fresh["run_id"], "val_loss")}
    assert history == reference
    print(
        f"killed after epoch {killed.data.tags['checkpoint.epochs']} of {EPOCHS}, resumed; val_loss by epoch:"
    )
    for step in sorted(history):
        print(f"  epoch {step + 1}: resumed run {history[step]:.6f}  uninterrupted {reference[step]:.6f}")
    assert resumed["metrics"] == fresh["metrics"]
    mine, theirs = best_weights(client, run_id, tmp_path), best_weights(client, fresh["run_id"], tmp_path)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert [str(v.version) for v in client.search_model_versions("name = 'crashy'")] == ["1"]
    # only the newest of each kind is kept, at the paths the tags name, whatever the kill left
    tags = client.get_run(run_id).data.tags
    assert checkpoint_files(client, run_id) == {tags["checkpoint.last"], tags["checkpoint.best"]}


def test_resume_takes_no_other_settings(tracking_uri):
    result = forecast(
        "train", "--resume", "abc", "--epochs", "3", *tiny_settings(), "--tracking-uri", tracking_uri
    )
    assert result.exit_code == 2
    assert "--resume continues the run with the config it was started with; drop --epochs, --overrides" in (
        result.stderr
    )


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def left_running(tracking_uri: str, experiment: str = "forecasting") -> str:
    """A model run as a SIGKILLed `forecast train` leaves it: RUNNING, its process gone."""
    import socket

    from pipelines.tracking import ensure_experiment

    experiment_id = ensure_experiment(experiment, tracking_uri)
    client = mlflow.MlflowClient(tracking_uri)
    tags = {"role": "model", HOST_TAG: socket.gethostname(), PID_TAG: str(dead_pid())}
    return client.create_run(experiment_id, run_name="killed", tags=tags).info.run_id


def test_stale_runs_are_listed_and_marked_killed(tracking_uri):
    stale = left_running(tracking_uri)
    client = mlflow.MlflowClient(tracking_uri)
    alive = client.create_run(
        client.get_experiment_by_name("forecasting").experiment_id,
        tags={"role": "model", HOST_TAG: __import__("socket").gethostname(), PID_TAG: str(os.getpid())},
    ).info.run_id
    listed = forecast("runs", "--stale", "--experiment", "forecasting", "--tracking-uri", tracking_uri)
    assert listed.exit_code == 0 and stale in listed.stdout and alive not in listed.stdout
    assert "is gone" in listed.stdout
    marked = forecast("runs", "--stale", "--mark-killed", "--tracking-uri", tracking_uri)
    assert marked.exit_code == 0 and "marked 1 run(s) KILLED" in marked.stdout
    assert client.get_run(stale).info.status == "KILLED"
    assert client.get_run(alive).info.status == "RUNNING"
    assert "no stale runs" in forecast("runs", "--stale", "--tracking-uri", tracking_uri).stdout


@pytest.mark.slow  # trains a real model: in make test, not make test-fast
def test_train_names_a_stale_run_and_only_a_killed_model_run_resumes(tracking_uri):
    """One tiny training for each case a trained run is needed for: `forecast train` names a stale
    run to resume; its own run, finished, keeps only its newest checkpoints and cannot be resumed,
    nor can its baseline (not a model run); killed between registering and finishing, the resumed
    run keeps its one version."""
    stale = left_running(tracking_uri)
    trained = forecast(
        "train", *tiny_settings(), "--register", "once", "--tracking-uri", tracking_uri, "--json"
    )
    assert trained.exit_code == 0, trained.output
    warnings = [line for line in trained.stderr.splitlines() if stale in line]
    assert len(warnings) == 1 and f"forecast train --resume {stale}" in warnings[0]
    first = json.loads(trained.stdout.strip().splitlines()[-1])
    run_id = first["run_id"]
    client = mlflow.MlflowClient(tracking_uri)

    files = checkpoint_files(client, run_id)
    assert {f.rpartition("/")[2] for f in files} == {"last.ckpt", "best.ckpt"} and len(files) == 2
    result = forecast("train", "--resume", run_id, "--tracking-uri", tracking_uri)
    assert result.exit_code == 2 and "the run finished" in result.stderr

    baseline = client.search_runs([client.get_run(run_id).info.experiment_id], "tags.role = 'baseline'")[0]
    result = forecast("train", "--resume", baseline.info.run_id, "--tracking-uri", tracking_uri)
    assert result.exit_code == 2 and "only a model run can be resumed" in result.stderr

    client.update_run(run_id, status="RUNNING")  # as a kill after registering would have left it
    client.set_tag(run_id, PID_TAG, str(dead_pid()))
    result = forecast("train", "--resume", run_id, "--tracking-uri", tracking_uri, "--json")
    assert result.exit_code == 0, result.output
    resumed = json.loads(result.stdout.strip().splitlines()[-1])
    assert resumed["registered_version"] == first["registered_version"] == "1"
    assert [str(v.version) for v in client.search_model_versions("name = 'once'")] == ["1"]
    assert client.get_run(run_id).info.status == "FINISHED"


def test_a_reused_pid_does_not_keep_a_dead_run_alive(tracking_uri):
    """The run's pid now names another live process (here: this one): its start time tells."""
    from pipelines.stale import PID_START_TAG, process_start

    run_id = left_running(tracking_uri)
    client = mlflow.MlflowClient(tracking_uri)
    client.set_tag(run_id, PID_TAG, str(os.getpid()))
    client.set_tag(run_id, PID_START_TAG, str(int(process_start(os.getpid())) - 1))
    listed = forecast("runs", "--stale", "--tracking-uri", tracking_uri)
    assert run_id in listed.stdout and "now belongs to another process" in listed.stdout
    client.set_tag(run_id, PID_START_TAG, process_start(os.getpid()))  # the very process: alive
    assert run_id not in forecast("runs", "--stale", "--tracking-uri", tracking_uri).stdout
