"""Every benchmark record names the code and the machine it was made on: the commit, marked dirty
when tracked files had changes, and the CPU, the kernels torch dispatches for, torch's version and
its threads (what decides a CPU run's floating-point results besides code and seed)."""

from __future__ import annotations

import subprocess
import sys

import torch

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import provenance  # noqa: E402


def git(repo, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_the_commit_is_marked_dirty_only_when_a_tracked_file_changed(tmp_path, monkeypatch):
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "code")
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    head = git(tmp_path, "rev-parse", "--short", "HEAD")

    (tmp_path / "notes.txt").write_text("not tracked\n")
    assert provenance.commit() == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert provenance.commit() == f"{head}+dirty"


def test_the_machine_is_this_one_as_torch_runs_on_it():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        found = provenance.machine()
    finally:
        torch.set_num_threads(before)
    assert found["torch"] == torch.__version__ and found["threads"] == 1
    assert found["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert found["cpu"] and found["cpu"] == provenance.cpu_model()
