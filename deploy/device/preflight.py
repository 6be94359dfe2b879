"""What the carried wheels and the accelerator image make together, checked in a second before
anything heavy runs there: a device lease is short, so a missing package should be named at once,
not found by an ImportError minutes into a training.

    python3 deploy/device/preflight.py --specs    # NAME==VERSION of each carried wheel (the builder's list)
    python3 deploy/device/preflight.py [--json]   # check this interpreter's environment

The check, for the environment this interpreter sees (the image, with the wheelhouse installed
into a folder on PYTHONPATH): every package wheels.txt carries is there at requirements.lock's
version; every requirement of those packages (their metadata's, extras aside) and every
dependency in pyproject.toml is there, unless wheels.txt leaves it out on purpose. A missing one
is a problem (exit 1); one present at a version outside what is asked for is a note, since the
image's versions are what they are (torch 2.11 there where the project pins 2.13) and only a run
shows whether it matters.

Only the standard library is needed for ``--specs``; the check also uses ``packaging``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WHEELS = HERE / "wheels.txt"
LOCK = REPO / "requirements.lock"
PYPROJECT = REPO / "pyproject.toml"
VERBS = ("carry", "override", "leave")


def canonical(name: str) -> str:
    """A distribution's name as package indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class WheelList:
    """wheels.txt: what is carried, what is carried over the image's copy, what is left out."""

    carry: list[str] = field(default_factory=list)
    override: list[str] = field(default_factory=list)
    leave: dict[str, str] = field(default_factory=dict)  # name -> why

    @property
    def carried(self) -> list[str]:
        return self.carry + self.override


def read_wheel_list(path: Path = WHEELS) -> WheelList:
    """Parse wheels.txt; a line that is not `VERB NAME  # why` is an error naming its number."""
    wheels = WheelList()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        code, _, comment = line.partition("#")
        words = code.split()
        if not words:
            continue
        if len(words) != 2 or words[0] not in VERBS:
            raise ValueError(f"{path}:{number}: expected 'carry|override|leave NAME', got {line.strip()!r}")
        verb, name = words[0], canonical(words[1])
        if verb == "leave":
            wheels.leave[name] = comment.strip()
        else:
            getattr(wheels, verb).append(name)
    return wheels


def locked_versions(path: Path = LOCK) -> dict[str, str]:
    """requirements.lock's pins, by canonical name."""
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", line)
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    return pins


def specs(wheels: WheelList, pins: dict[str, str]) -> list[str]:
    """NAME==VERSION for every carried package, or an error naming those the lock does not pin."""
    unpinned = [name for name in wheels.carried if name not in pins]
    if unpinned:
        raise ValueError(f"not pinned in {LOCK.name}: {', '.join(unpinned)}")
    return [f"{name}=={pins[name]}" for name in wheels.carried]


def project_dependencies(path: Path = PYPROJECT) -> list[str]:
    return tomllib.loads(path.read_text())["project"]["dependencies"]


@dataclass
class Finding:
    package: str
    asked_by: str
    wanted: str
    found: str | None  # the installed version, None when missing
    where: str | None = None  # the folder it was found in


@dataclass
class Report:
    problems: list[Finding] = field(default_factory=list)  # missing: the run would fail
    notes: list[Finding] = field(default_factory=list)  # present at another version than asked
    provided: dict[str, str] = field(default_factory=dict)  # what the carried wheels rely on, by version

    @property
    def ok(self) -> bool:
        return not self.problems


def installed(name: str) -> tuple[str, str] | None:
    """(version, folder) of the distribution Python would import, or None."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    folder = str(Path(str(dist.locate_file(""))).resolve())
    return dist.version, folder


def check(wheels: WheelList, pins: dict[str, str], site: Path | None) -> Report:
    """The environment this interpreter sees, against wheels.txt, their metadata and pyproject."""
    from packaging.requirements import Requirement

    report = Report()
    for name in wheels.carried:
        found = installed(name)
        where = found[1] if found else None
        if found is None or found[0] != pins[name] or (site and where != str(site.resolve())):
            wanted = f"=={pins[name]} from the wheelhouse"
            report.problems.append(Finding(name, "wheels.txt", wanted, found and found[0], where))
    asked = [(name, text) for name in wheels.carried for text in metadata.requires(name) or []]
    asked += [("pyproject.toml", text) for text in project_dependencies()]
    for asker, text in asked:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue  # an extra's, or another platform's
        name = canonical(requirement.name)
        if name in wheels.leave:
            continue
        found = installed(name)
        wanted = str(requirement.specifier) or "any"
        if found is None:
            report.problems.append(Finding(name, asker, wanted, None))
            continue
        if name not in wheels.carried:
            report.provided[name] = found[0]
        if not requirement.specifier.contains(found[0], prereleases=True):
            report.notes.append(Finding(name, asker, wanted, found[0], found[1]))
    return report


def describe(report: Report) -> str:
    lines = [f"preflight: {'ok' if report.ok else 'MISSING PACKAGES'}"]
    for finding in report.problems:
        found = f"found {finding.found} in {finding.where}" if finding.found else "not installed"
        lines.append(f"  problem: {finding.package} {finding.wanted} (for {finding.asked_by}): {found}")
    for finding in report.notes:
        lines.append(
            f"  note: {finding.package} {finding.found} where {finding.asked_by} asks {finding.wanted}"
        )
    provided = ", ".join(f"{name} {version}" for name, version in sorted(report.provided.items()))
    lines.append(f"  from the environment: {provided}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", action="store_true", help="print NAME==VERSION of the carried wheels")
    parser.add_argument("--site", type=Path, help="the folder the wheelhouse was installed into")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    args = parser.parse_args(argv)
    try:
        wheels, pins = read_wheel_list(), locked_versions()
        carried = specs(wheels, pins)
    except (OSError, ValueError) as exc:
        print(f"preflight: {exc}", file=sys.stderr)
        return 2
    if args.specs:
        print("\n".join(carried))
        return 0
    report = check(wheels, pins, args.site)
    print(json.dumps(asdict(report) | {"ok": report.ok}) if args.json else describe(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
