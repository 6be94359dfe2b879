"""Run every ```bash block of README.md as written, in order, one `bash` per block under
`set -euo pipefail`, in a fresh copy of the repository's files with the project's virtualenv.

Why: README's blocks are what a new user pastes first; a block that no longer runs (a renamed flag,
a server left listening, a port two blocks share) is found here rather than by that user.

    .venv/bin/python -m tests.readme_blocks                    # this checkout's README and code
    .venv/bin/python -m tests.readme_blocks --source ../main   # this README against another checkout's code
    .venv/bin/python -m tests.readme_blocks --drop-flag --allow-worse-than-naive   # code without a flag yet

The set-up block (`make demo`, `make test`) is not run as written: the copy gets what `make demo`
does once its virtualenv exists (`python -m pipelines.demo`), and `make test` is the test suite
itself. A block fails on a non-zero exit, on a process it started that is still alive when it
ends (killed then, by its id), or on a port it names still accepting connections.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\s*$")
SETUP_COMMANDS = ("make demo", "make test")
# a server's port, as the blocks write it: `--port 5001`, or a URL on loopback
PORT = re.compile(r"--port[ =](\d+)|(?:127\.0\.0\.1|localhost):(\d+)")


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    language: str
    code: str

    @property
    def is_setup(self) -> bool:
        """The set-up block: only `make demo` / `make test` lines (comments aside)."""
        commands = [c.split("#")[0].strip() for c in self.code.splitlines() if c.split("#")[0].strip()]
        return bool(commands) and all(c in SETUP_COMMANDS for c in commands)

    @property
    def ports(self) -> set[int]:
        return {int(a or b) for a, b in PORT.findall(self.code)}


@dataclass
class Result:
    line: int
    seconds: float
    returncode: int
    problems: list[str] = field(default_factory=list)
    output: str = ""

    @property
    def output_tail(self) -> str:
        return self.output[-4000:]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.problems


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, in order, with its language."""
    blocks: list[Block] = []
    opened: tuple[int, str] | None = None
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if opened is None and match:
            opened, lines = (number, match.group(1)), []
        elif opened is not None and line.strip() == "```":
            blocks.append(Block(opened[0], opened[1], "\n".join(lines) + "\n"))
            opened = None
        elif opened is not None:
            lines.append(line)
    if opened is not None:
        raise ValueError(f"the block opened on line {opened[0]} is never closed")
    return blocks


def bash_blocks(text: str) -> list[Block]:
    return [b for b in fenced_blocks(text) if b.language == "bash"]


def copy_tree(source: Path, destination: Path, venv: Path) -> None:
    """The files git would hand a new clone (tracked, and new ones not ignored), as they are now
    in ``source``'s working tree; `.venv` links to the project's virtualenv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        path = source / name
        if not path.is_file():  # deleted in the working tree, or a submodule
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    (destination / ".venv").symlink_to(venv)


def block_environment(copy: Path) -> dict[str, str]:
    """The user's environment, with the copy's code first on the path (the virtualenv's editable
    install points at the checkout it was made in) and no tracking server or key of theirs."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "API_KEY", "MODEL_URI")}
    env["PYTHONPATH"] = str(copy)
    return env


def session_processes(session: int) -> list[int]:
    """Processes still in the session a block's bash led (its `&` servers and their children)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def stragglers(session: int, grace: float) -> list[int]:
    """The session's processes still alive ``grace`` seconds after its bash ended (a server's
    helper, multiprocessing's resource tracker say, may outlive it by a moment)."""
    deadline = time.monotonic() + grace
    while (alive := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120].strip()
    except OSError:
        return "gone"


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def without_flags(code: str, flags: list[str]) -> str:
    """The block with each named boolean flag removed, for code that lacks it."""
    for flag in flags:
        code = re.sub(rf" {re.escape(flag)}(?=\s)", "", code)
    return code


def run_block(block: Block, copy: Path, timeout: float, drop: list[str], grace: float = 10.0) -> Result:
    busy = sorted(p for p in block.ports if listening(p))
    if busy:
        return Result(block.line, 0.0, -1, [f"port(s) {busy} already in use before the block ran"])
    script = "set -euo pipefail\n" + without_flags(block.code, drop)
    started = time.perf_counter()
    problems: list[str] = []
    # output to a file, not a pipe: a server the block leaves running would hold a pipe open, and
    # the block ends when its bash does
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            ["bash", "-c", script],
            cwd=copy,
            env=block_environment(copy),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its session id is its pid: what it leaves behind is findable
        )
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            problems.append(f"still running after {timeout:.0f} s")
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        seconds = time.perf_counter() - started
        leftover = stragglers(process.pid, grace)
        open_ports = sorted(p for p in block.ports if listening(p))
        if leftover:
            described = ", ".join(f"{pid} ({command_line(pid)})" for pid in leftover)
            problems.append(f"processes still running {grace:.0f} s after the block: {described} (killed)")
            for pid in leftover:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if open_ports:
            problems.append(f"port(s) {open_ports} still listening after the block")
        log.seek(0)
        output = log.read()
    return Result(block.line, seconds, process.returncode, problems, output)


def run_demo(copy: Path, timeout: float) -> Result:
    """What `make demo` runs once its virtualenv is installed."""
    demo = Block(0, "bash", 'PATH="$PWD/.venv/bin:$PATH" .venv/bin/python -m pipelines.demo\n')
    return run_block(demo, copy, timeout, [])


def run_readme(
    readme: Path,
    source: Path,
    venv: Path,
    timeout: float,
    drop: list[str],
    only: set[int] | None,
    log_dir: Path | None = None,
) -> list[Result]:
    """Every bash block of ``readme``, in order, in a fresh copy of ``source``; stops at the first
    failure (later blocks build on earlier ones). With ``log_dir``, each block's whole output is
    kept there as ``line-N.txt`` (the epoch lines of a training, say)."""
    blocks = bash_blocks(readme.read_text())
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="readme-blocks-") as scratch:
        copy = Path(scratch) / "repo"
        copy.mkdir()
        copy_tree(source, copy, venv)
        shutil.copy2(readme, copy / "README.md")
        setup = run_demo(copy, timeout)
        results.append(setup)
        report(setup, "make demo (python -m pipelines.demo)", log_dir)
        if not setup.ok:
            return results
        for block in blocks:
            if block.is_setup or (only is not None and block.line not in only):
                continue
            result = run_block(block, copy, timeout, drop)
            results.append(result)
            report(result, block.code.splitlines()[0], log_dir)
            if not result.ok:
                break
    return results


def report(result: Result, title: str, log_dir: Path | None = None) -> None:
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"line-{result.line}.txt").write_text(result.output)
    verdict = "ok" if result.ok else f"FAILED (exit {result.returncode})"
    print(f"line {result.line:>4}  {result.seconds:7.1f} s  {verdict}  {title[:70]}", flush=True)
    if not result.ok:
        for problem in result.problems:
            print(f"            {problem}")
        print(result.output_tail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", type=Path, default=REPO / "README.md")
    parser.add_argument("--source", type=Path, default=REPO, help="the checkout whose code the blocks run")
    parser.add_argument("--venv", type=Path, default=Path(sys.prefix), help="default: this interpreter's")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per block")
    parser.add_argument("--drop-flag", action="append", default=[], help="remove this flag from every block")
    parser.add_argument("--only", type=int, action="append", help="run only the block opening on this line")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--log-dir", type=Path, help="keep each block's whole output here")
    args = parser.parse_args(argv)
    results = run_readme(
        args.readme.resolve(),
        args.source.resolve(),
        args.venv.resolve(),
        args.timeout,
        args.drop_flag,
        set(args.only) if args.only else None,
        args.log_dir,
    )
    if args.json:
        args.json.write_text(
            json.dumps([asdict(r) | {"ok": r.ok, "output": r.output_tail} for r in results], indent=1)
        )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
