"""Where a benchmark's raw results were made: the code and the machine. Recorded with every run
because the same code and seed can train to other figures elsewhere: ETTh1 runs made at 174bd1b
on an earlier machine differ from reruns here from the 7th digit on (and by up to 0.022 test MSE
after early stopping took another epoch), while 174bd1b's own code, rerun on this machine with one
or two torch threads, reproduces the reruns to every digit. A record that names the CPU and the
kernels torch chose lets the next such difference be attributed instead of guessed at."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The code the runs were made with (``+dirty`` when tracked files had changes)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``platform.processor()`` is often empty on
    Linux), or the platform's machine type where /proc/cpuinfo is not there."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str | int]:
    """What decides a CPU run's floating-point results besides the code and the seed: the CPU, the
    instruction set torch dispatches its kernels for, torch's version and its thread count."""
    import torch

    return {
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
