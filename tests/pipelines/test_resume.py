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

import mlflow
import pytest
import torch

from pipelines.stale import HOST_TAG, PID_TAG
from tests.conftest import REPO, TINY
from tests.pipelines.helpers import forecast, tiny_settings, train_json

# six epochs of a couple of seconds each: time to see epoch 2's checkpoint and kill before the end
SLOW_EPOCHS = [
    *(s for s in TINY if not s.startswith(("train.epochs", "train.limit_train_batches", "train.batch_size"))),
    "train.epochs=6",
    "train.patience=10",
    "train.batch_size=32",
    "model.hidden_size=16",
]


def cli(tmp_path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", "train", *args]


def run_cli(tmp_path, *args: str, env: dict[str, str] | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    result = subprocess.run(
        cli(tmp_path, *args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def settings(*extra: str) -> list[str]:
    return [arg for item in [*SLOW_EPOCHS, *extra] for arg in ("--set", item)]


def kill_after_checkpoint(
    tmp_path, uri: str, epochs_done: int, *args: str, env: dict[str, str] | None = None
) -> str:
    """Start `forecast train`, SIGKILL its whole process group (every DDP rank, as a lost machine
    would) once the run logged the checkpoint of ``epochs_done``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    process = subprocess.Popen(
        cli(tmp_path, *args),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    client = mlflow.MlflowClient(uri)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            assert process.poll() is None, "training ended before it could be killed"
            experiment = client.get_experiment_by_name("crash")
            runs = client.search_runs([experiment.experiment_id]) if experiment else []
            if runs and int(runs[0].data.tags.get("checkpoint.epochs", 0)) >= epochs_done:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return runs[0].info.run_id
            time.sleep(0.05)
        raise AssertionError("no checkpoint logged in time")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def best_weights(client: mlflow.MlflowClient, run_id: str, tmp_path) -> dict[str, torch.Tensor]:
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
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = ["--experiment", "crash", "--tracking-uri", uri, "--json"]
    run_id = kill_after_checkpoint(tmp_path, uri, 2, *settings(), "--register", "crashy", *common)
    client = mlflow.MlflowClient(uri)
    killed = client.get_run(run_id)
    assert killed.info.status == "RUNNING" and int(killed.data.tags["checkpoint.epochs"]) < 6
    # the files the tags name are there; the kill may land between retagging a new file and
    # deleting the one it replaces, so an older one may be left too, until the resumed run's next
    pointed = {killed.data.tags["checkpoint.last"], killed.data.tags["checkpoint.best"]}
    left = checkpoint_files(client, run_id)
    assert pointed <= left and {f.rpartition("/")[2] for f in left} <= {"last.ckpt", "best.ckpt"}

    resumed = run_cli(tmp_path, "--resume", run_id, "--tracking-uri", uri, "--json")
    fresh = run_cli(tmp_path, *settings(), "--experiment", "fresh", "--tracking-uri", uri, "--json")

    assert resumed["run_id"] == run_id
    runs = client.search_runs([client.get_experiment_by_name("crash").experiment_id], "tags.role = 'model'")
    assert [(r.info.run_id, r.info.status) for r in runs] == [(run_id, "FINISHED")]
    for name in ("val_loss", "train_loss"):
        steps = [m.step for m in client.get_metric_history(run_id, name)]
        assert sorted(steps) == list(range(6)), (name, steps)
    lr_steps = [m.step for m in client.get_metric_history(run_id, "lr-AdamW")]  # by global step
    assert len(lr_steps) == len(set(lr_steps)) == 6
    history = {m.step: m.value for m in client.get_metric_history(run_id, "val_loss")}
    reference = {m.step: m.value for m in client.get_metric_history(fresh["run_id"], "val_loss")}
    assert history == reference
    print(f"killed after epoch {killed.data.tags['checkpoint.epochs']} of 6, resumed; val_loss by epoch:")
    for step in sorted(history):
        print(f"  epoch {step + 1}: resumed run {history[step]:.6f}  uninterrupted {reference[step]:.6f}")
    assert resumed["metrics"] == fresh["metrics"]
    mine, theirs = best_weights(client, run_id, tmp_path), best_weights(client, fresh["run_id"], tmp_path)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert [str(v.version) for v in client.search_model_versions("name = 'crashy'")] == ["1"]
    # only the newest of each kind is kept, at the paths the tags name, whatever the kill left
    tags = client.get_run(run_id).data.tags
    assert checkpoint_files(client, run_id) == {tags["checkpoint.last"], tags["checkpoint.best"]}


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_a_finished_run_cannot_be_resumed(tracking_uri):
    run_id = train_json(tracking_uri)["run_id"]
    client = mlflow.MlflowClient(tracking_uri)
    files = checkpoint_files(client, run_id)
    assert {f.rpartition("/")[2] for f in files} == {"last.ckpt", "best.ckpt"} and len(files) == 2
    result = forecast("train", "--resume", run_id, "--tracking-uri", tracking_uri)
    assert result.exit_code == 2 and "the run finished" in result.stderr


def test_resume_takes_no_other_settings(tracking_uri):
    result = forecast(
        "train", "--resume", "abc", "--epochs", "3", *tiny_settings(), "--tracking-uri", tracking_uri
    )
    assert result.exit_code == 2
    assert "--resume continues the run with the config it was started with; drop --epochs, --overrides" in (
        result.stderr
    )


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_only_a_model_run_can_be_resumed(tracking_uri):
    run_id = train_json(tracking_uri)["run_id"]
    client = mlflow.MlflowClient(tracking_uri)
    baseline = client.search_runs([client.get_run(run_id).info.experiment_id], "tags.role = 'baseline'")[0]
    result = forecast("train", "--resume", baseline.info.run_id, "--tracking-uri", tracking_uri)
    assert result.exit_code == 2 and "only a model run can be resumed" in result.stderr


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


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_train_names_a_stale_run_to_resume(tracking_uri):
    stale = left_running(tracking_uri)
    result = forecast("train", *tiny_settings(), "--tracking-uri", tracking_uri)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if stale in line]
    assert len(warnings) == 1 and f"forecast train --resume {stale}" in warnings[0]


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_a_run_killed_after_it_registered_registers_nothing_more_on_resume(tracking_uri):
    """Killed between registering and finishing: the resumed run keeps its one version."""
    first = train_json(tracking_uri, register="once")
    client = mlflow.MlflowClient(tracking_uri)
    client.update_run(first["run_id"], status="RUNNING")  # as the kill would have left it
    client.set_tag(first["run_id"], PID_TAG, str(dead_pid()))
    result = forecast("train", "--resume", first["run_id"], "--tracking-uri", tracking_uri, "--json")
    assert result.exit_code == 0, result.output
    resumed = json.loads(result.stdout.strip().splitlines()[-1])
    assert resumed["registered_version"] == first["registered_version"] == "1"
    assert [str(v.version) for v in client.search_model_versions("name = 'once'")] == ["1"]
    assert client.get_run(first["run_id"]).info.status == "FINISHED"


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


@pytest.mark.slow
def test_a_second_resume_of_a_run_being_resumed_is_refused_by_name(tmp_path):
    """Two `--resume` of one run: the first takes the run's lock and trains; the second, started
    while the first holds it (frozen with SIGSTOP, so no timing decides), is refused naming it."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = kill_after_checkpoint(
        tmp_path, uri, 1, *settings(), "--experiment", "crash", "--tracking-uri", uri
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    resume = cli(tmp_path, "--resume", run_id, "--tracking-uri", uri, "--quiet")
    first = subprocess.Popen(
        resume, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    client = mlflow.MlflowClient(uri)
    try:
        deadline = time.monotonic() + 300
        while client.get_run(run_id).data.tags.get(PID_TAG) != str(first.pid):  # it holds the run
            assert first.poll() is None and time.monotonic() < deadline, "the first resume ended early"
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)
        second = subprocess.run(resume, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        first.send_signal(signal.SIGCONT)
    except BaseException:
        first.kill()
        raise
    assert second.returncode != 0
    refusal = second.stdout + second.stderr
    assert f"another process is training this run: pid {first.pid} on " in refusal, refusal
    assert "since 20" in refusal and "Traceback" not in refusal, refusal
    output = first.communicate(timeout=600)[0]
    assert first.returncode == 0, output
    assert client.get_run(run_id).info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run_id, "val_loss")]
    assert sorted(steps) == list(range(6))  # trained once: no epoch logged twice
