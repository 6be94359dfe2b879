"""The accelerator machine's wheel list (deploy/device/wheels.txt) against requirements.lock, the
image's package list and the packages' own metadata, without downloading anything: every carried
wheel has a locked version, none duplicates the image unless marked as an override, and every
requirement of what is carried (and of pyproject.toml) is carried, in the image, or left out with
a reason. The scripts refuse bad arguments in one line. (deploy/device/rehearse.sh does the real
install from a fresh venv; it needs the network, so it is not part of `make test`.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "deploy" / "device"))

import preflight  # noqa: E402

DEVICE = REPO / "deploy" / "device"


def image() -> set[str]:
    lines = (DEVICE / "image.txt").read_text().splitlines()
    return {preflight.canonical(line) for line in lines if line.strip() and not line.startswith("#")}


def asked(name_or_text: str) -> str | None:
    """The canonical name a requirement asks for, or None for an extra's or another platform's."""
    requirement = Requirement(name_or_text)
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        return None
    return preflight.canonical(requirement.name)


def test_every_carried_wheel_has_a_locked_version_and_this_venv_has_it():
    wheels, pins = preflight.read_wheel_list(), preflight.locked_versions()
    specs = preflight.specs(wheels, pins)
    assert len(specs) == len(set(wheels.carried)), "a package is listed twice"
    for name in wheels.carried:
        assert metadata.version(name) == pins[name], f"{name}: the venv is not at requirements.lock's version"


def test_the_image_holds_the_overrides_and_none_of_the_rest():
    wheels, held = preflight.read_wheel_list(), image()
    assert held >= {"torch", "pytorch-lightning", "onnxruntime", "uvloop", "httpx"}  # the list parsed
    assert not set(wheels.carry) & held, "carried although the image has it: mark it override, with why"
    assert set(wheels.override) <= held, "an override of a package the image lacks: carry it"
    assert not set(wheels.carried) & set(wheels.leave)


def test_what_the_carried_packages_and_the_project_ask_for_is_covered():
    wheels, held = preflight.read_wheel_list(), image()
    covered = set(wheels.carried) | held | set(wheels.leave)
    for name in wheels.carried:
        for text in metadata.requires(name) or []:
            wanted = asked(text)
            assert wanted is None or wanted in covered, (
                f"{name} needs {wanted}: carry it or leave it, saying why"
            )
    for text in preflight.project_dependencies():
        wanted = asked(text)
        assert wanted in covered, f"pyproject.toml needs {wanted}: carry it or leave it, saying why"
    assert all(wheels.leave.values()), "every package left out says why"


def test_this_venv_passes_the_preflight_and_a_wrong_version_is_a_problem():
    wheels, pins = preflight.read_wheel_list(), preflight.locked_versions()
    report = preflight.check(wheels, pins, site=None)
    assert report.ok, preflight.describe(report)
    assert "torch" in report.provided and "fastapi" not in report.provided  # provided: what is not carried
    wrong = preflight.WheelList(carry=["fastapi"])
    report = preflight.check(wrong, {"fastapi": "0.0.1"}, site=None)
    assert [(f.package, f.found) for f in report.problems] == [("fastapi", metadata.version("fastapi"))]


def test_a_malformed_line_is_named(tmp_path):
    listing = tmp_path / "wheels.txt"
    listing.write_text("carry fastapi\ncary uvicorn  # typo\n")
    with pytest.raises(ValueError, match=r"wheels.txt:2: expected 'carry\|override\|leave NAME'"):
        preflight.read_wheel_list(listing)


def run(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "OUT"} | (env or {})
    return subprocess.run(
        ["bash", str(DEVICE / script), *args], capture_output=True, text=True, env=environment, timeout=60
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--python-version", "twelve"], "is not of the form 3.12"),
        (["--dest"], "--dest needs a folder"),
        (["--fast"], "unknown argument '--fast'"),
    ],
)
def test_the_builder_refuses_bad_arguments_before_downloading(args, message):
    done = run("wheelhouse.sh", *args)
    assert done.returncode == 2 and message in done.stderr


def test_the_check_says_what_is_missing_before_installing_anything(tmp_path):
    done = run("gpu_check.sh")
    assert done.returncode == 2 and "give --out DIR (or set OUT)" in done.stderr
    done = run("gpu_check.sh", "--out", str(tmp_path / "out"), env={"WHEELHOUSE": str(tmp_path)})
    assert done.returncode == 2 and re.search(r"no wheels in .*deploy/device/wheelhouse\.sh", done.stderr)
