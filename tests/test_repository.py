"""The repository installs what it says (issue 14): bounded ranges in pyproject.toml, and a lock
file that pins every one of them (`make lock` refreshes it; `make install` installs it)."""

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [group for name, group in project.get("optional-dependencies", {}).items() if name not in APART]
    return [Requirement(line) for group in [project["dependencies"], *extras] for line in group]


def declared_apart(extra: str) -> list[Requirement]:
    return [Requirement(line) for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
            ["optional-dependencies"][extra]]


# The realmodel extra (issue 26) is locked apart: requirements/realmodel.txt is lock.txt plus it.
APART = {"realmodel": "realmodel.txt"}


def pinned(lock: str = "lock.txt") -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "requirements" / lock).read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, _, version = line.split(" ")[0].partition("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins


def test_every_dependency_has_an_upper_bound():
    unbounded = [str(r) for r in declared() if not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)]
    assert unbounded == []


def test_the_lock_pins_every_dependency_within_its_range_else_run_make_lock():
    pins = pinned()
    stale = [
        f"{r} (locked: {pins.get(canonicalize_name(r.name), 'missing')})"
        for r in declared()
        if (r.marker is None or r.marker.evaluate({"extra": ""}))
        and not (canonicalize_name(r.name) in pins and pins[canonicalize_name(r.name)] in r.specifier)
    ]
    assert stale == [], "requirements/lock.txt is out of date with pyproject.toml: run `make lock`"


def test_the_realmodel_lock_pins_its_extra_and_everything_the_main_lock_pins():
    pins = pinned(APART["realmodel"])
    stale = [f"{r} (locked: {pins.get(canonicalize_name(r.name), 'missing')})" for r in declared_apart("realmodel")
             if not (canonicalize_name(r.name) in pins and pins[canonicalize_name(r.name)] in r.specifier)]
    assert stale == [], "requirements/realmodel.txt is out of date with pyproject.toml: run `make lock`"
    assert all(pins.get(name) == version for name, version in pinned().items()), "run `make lock`"
