"""Pure decisions of ``streamapp image build``: what the user's wheel needs, what the base image has, and the
Dockerfile that puts the one on the other.

The user's package is installed with pip into the base image's venv (``/opt/streamapp/venv``), resolved against
the distributions already there (``pip install --no-index``: nothing is downloaded, the runtime's pins stay as
they are) and checked with ``pip check``. The wheel's requirements are checked first, here, so that a
requirement the image cannot meet fails before any build with one message naming every problem.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Final

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = [
    "DEFAULT_BASE",
    "RUNTIME",
    "VENV",
    "AppImageError",
    "ImageFacts",
    "Wheel",
    "dockerfile",
    "image_facts",
    "read_wheel",
    "requirement_problems",
    "wheel_versions",
]

DEFAULT_BASE: Final = "localhost/streamapp:dev"
"""The project's image (``make image``): the runtime and its pinned dependencies in ``VENV``."""
RUNTIME: Final = "streamapp-runtime"
VENV: Final = "/opt/streamapp/venv"
_USER: Final = "10001:10001"  # the base image's USER (Dockerfile): numeric, so runAsNonRoot can verify it
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


class AppImageError(ValueError):
    """The package cannot go into the image as asked; the message says what to change."""


@dataclass(frozen=True)
class Wheel:
    """A built distribution: its file, ``Name``, ``Version`` and ``Requires-Dist`` lines (PEP 566 metadata)."""

    path: Path
    name: str
    version: str
    requires: tuple[str, ...]

    @property
    def module_hint(self) -> str:
        """The import name a package of this name usually has (``my-app`` -> ``my_app``)."""
        return canonicalize_name(self.name).replace("-", "_")


@dataclass(frozen=True)
class ImageFacts:
    """What the base image has: ``distributions`` (canonical name -> version) installed in its venv and the PEP 508
    marker ``environment`` of its interpreter (``python_version``, ``sys_platform``, ...)."""

    distributions: Mapping[str, str]
    environment: Mapping[str, str]


def read_wheel(path: Path) -> Wheel:
    """The metadata of the wheel at ``path`` (its ``*.dist-info/METADATA``). Raises AppImageError when the file is
    not a wheel."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                raise AppImageError(f"{path}: not a wheel (no single *.dist-info/METADATA in it)")
            text = archive.read(names[0]).decode("utf-8")
    except (OSError, zipfile.BadZipFile) as exc:
        raise AppImageError(f"{path}: not a wheel ({exc})") from exc
    headers = HeaderParser().parsestr(text)
    if not headers["Name"] or not headers["Version"]:
        raise AppImageError(f"{path}: its METADATA has no Name or Version")
    return Wheel(path, headers["Name"], headers["Version"], tuple(headers.get_all("Requires-Dist") or ()))


def wheel_versions(filenames: Iterable[str]) -> dict[str, list[str]]:
    """Canonical distribution name -> versions, of the wheel file names among ``filenames`` (PEP 427 names)."""
    found: dict[str, list[str]] = {}
    for filename in filenames:
        match = _WHEEL_NAME.match(filename)
        if match:
            found.setdefault(canonicalize_name(match["name"]), []).append(match["version"])
    return found


def requirement_problems(wheel: Wheel, image: ImageFacts, provided: Mapping[str, list[str]]) -> list[str]:
    """Every requirement of ``wheel`` (its markers evaluated in the image's ``environment``, extras left out) that
    neither the image's distributions nor the ``provided`` wheels (canonical name -> versions, from
    ``--find-links``) satisfy, one message each; empty when all are met.

    A requirement on a distribution the image has must accept the image's version: pip would otherwise replace a
    pinned dependency of the runtime, or, for ``streamapp-runtime`` itself, run the code on another runtime than
    the one it was written for. The image's distributions come first, as ``pip install`` keeps an installed
    version that satisfies the requirement.
    """
    problems = []
    environment = {**image.environment, "extra": ""}
    for line in wheel.requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            problems.append(f"requirement '{line}' cannot be parsed: {exc}")
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        name = canonicalize_name(requirement.name)
        installed = image.distributions.get(name)
        if installed is not None:
            if not requirement.specifier.contains(installed, prereleases=True):
                problems.append(_conflict(wheel, requirement, installed))
            continue
        offered = [v for v in provided.get(name, []) if _contains(requirement, v)]
        if not offered:
            problems.append(
                f"{wheel.name} requires {requirement}, which the base image does not have: put its wheel (and those "
                f"of its dependencies) in a folder and pass it with --find-links (pip download --only-binary=:all: "
                f"--python-version {environment.get('python_version', '3.11')} --dest wheels '{requirement}')"
            )
    return problems


def _conflict(wheel: Wheel, requirement: Requirement, installed: str) -> str:
    if canonicalize_name(requirement.name) == RUNTIME:
        return (
            f"{wheel.name} requires {requirement}, but the base image has {RUNTIME} {installed}: build the image "
            f"FROM an image of that runtime (--base), or change the package's requirement to accept {installed} "
            f"(e.g. '{RUNTIME}=={installed}')"
        )
    return (
        f"{wheel.name} requires {requirement}, but the base image pins {requirement.name} {installed} for the "
        f"runtime: accept {installed} in the package's requirement"
    )


def _contains(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def dockerfile(base: str, wheel: Wheel, extra_wheels: Iterable[str] = ()) -> str:
    """The Dockerfile of the app image, for a build context holding ``wheels/`` (the user's wheel, named by
    ``wheel.path.name``, and ``extra_wheels``, file names of the dependencies the base image lacks).

    It installs the wheel into the base image's venv as root with pip, offline and resolved against what is
    installed (``--no-index --find-links``), runs ``pip check``, and switches back to the base image's non-root
    user, whose ``PATH`` and ``WORKDIR`` are kept. ``ENTRYPOINT`` stays ``streamapp``.
    """
    extras = "".join(f"#   {name}\n" for name in sorted(extra_wheels))
    return (
        "# The app image: the package below installed into the StreamApp image's venv.\n"
        f"# Generated by `streamapp image build` (docs/quickstart.md); build context: wheels/{wheel.path.name}\n"
        + (f"# and the wheels of dependencies the base image lacks:\n{extras}" if extras else "")
        + f"ARG BASE_IMAGE={base}\n"
        "FROM ${BASE_IMAGE}\n"
        "USER 0:0\n"
        "COPY wheels/ /tmp/app-wheels/\n"
        "# offline, against the runtime's pinned dependencies already in the venv; pip check fails on a conflict\n"
        f"RUN {VENV}/bin/pip install --quiet --no-cache-dir --no-index --disable-pip-version-check \\\n"
        f"        --no-warn-script-location --find-links /tmp/app-wheels /tmp/app-wheels/{wheel.path.name} \\\n"
        f"    && {VENV}/bin/pip check --disable-pip-version-check \\\n"
        "    && rm -rf /tmp/app-wheels\n"
        f"USER {_USER}\n"
        f'LABEL io.streamapp.app="{wheel.name}=={wheel.version}"\n'
    )


def image_facts(probe: Mapping[str, Mapping[str, str]]) -> ImageFacts:
    """``ImageFacts`` from the base image's probe document ``{"distributions": {name: version}, "environment":
    {marker: value}}`` (``tools.PROBE``'s output), names canonicalized (PEP 503)."""
    distributions = {str(canonicalize_name(name)): version for name, version in probe["distributions"].items()}
    return ImageFacts(distributions, dict(probe["environment"]))
