"""The `forecast` console script: a Ctrl-C while the command line is still being imported (its
first second) is one line and exit status 130, as a Ctrl-C in a command is, not an import's
traceback."""

from __future__ import annotations

import builtins
import signal
import sys

import pytest

from pipelines import entry


def test_a_ctrl_c_while_the_command_line_imports_is_one_line_and_130(monkeypatch, capsys):
    real_import = builtins.__import__

    def cut(name, *args, **kwargs):
        if name == "pipelines.cli":
            raise KeyboardInterrupt  # the user's Ctrl-C, landing inside the import
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "pipelines.cli", raising=False)
    monkeypatch.setattr(builtins, "__import__", cut)
    before = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as leaving:
            entry.main()
        # after the command, a Ctrl-C while background writers finish is said, not a traceback
        assert signal.getsignal(signal.SIGINT) is entry.interrupted_at_teardown
    finally:
        signal.signal(signal.SIGINT, before)
    assert leaving.value.code == entry.INTERRUPTED_EXIT == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_the_console_script_is_this_entry_point():
    import tomllib

    from tests.conftest import REPO

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["forecast"] == "pipelines.entry:main"
