"""requirements.lock pins every dependency of pyproject.toml (with the dev and s3 extras) at a
version its specifier allows, so `make test`, `make demo`, the Dockerfile and CI install the same
set. A dependency added or re-pinned in pyproject.toml without `make lock` fails here."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCKED_EXTRAS = ("dev", "s3", "spark")
NEVER_PINNED = {"pip-tools"}  # pip-compile does not pin itself


def locked() -> dict[str, Version]:
    pins = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = Version(version)
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in LOCKED_EXTRAS:
        specs += project["optional-dependencies"][extra]
    return [Requirement(spec) for spec in specs]


def test_every_declared_dependency_is_pinned_within_its_specifier():
    pins = locked()
    problems = []
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        if name in NEVER_PINNED:
            continue
        if name not in pins:
            problems.append(f"{requirement} is not in requirements.lock")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{requirement} but requirements.lock pins {pins[name]}")
    assert not problems, "run `make lock`: " + "; ".join(problems)


def test_torch_is_pinned_without_a_local_build_label():
    assert str(locked()["torch"]) == "2.13.0"  # constrains CPU (+cpu) and CUDA (+cu1xx) builds alike
