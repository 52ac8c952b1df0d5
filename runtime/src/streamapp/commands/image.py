"""``streamapp image build PACKAGE --tag TAG [--base IMAGE] [--find-links DIR ...]``: the app image of a user's
package, ``FROM`` the StreamApp image (``streamapp.app_image``).

PACKAGE is a wheel, or a folder with a ``pyproject.toml`` that is built into one first. The wheel's requirements
are checked against what the base image has installed (another ``streamapp-runtime`` than the image's is refused)
before anything is built; the image installs the wheel into the base image's venv offline. ``build_app_image``
decides and drives the ``ImageTools`` seam; the command only gives it ``LocalTools`` (podman, buildah).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from streamapp.app_image.plan import (
    DEFAULT_BASE,
    AppImageError,
    Wheel,
    dockerfile,
    image_facts,
    read_wheel,
    requirement_problems,
    wheel_versions,
)
from streamapp.app_image.tools import ImageTools, LocalTools, ToolError

__all__ = ["BuiltImage", "build_app_image", "image"]


@dataclass(frozen=True)
class BuiltImage:
    """What ``build_app_image`` built: the image ``tag``, its ``base``, the installed ``wheel`` and the
    ``dockerfile`` text it used."""

    tag: str
    base: str
    wheel: Wheel
    dockerfile: str


@click.group()
def image() -> None:
    """Build the container image of your application."""


@image.command("build")
@click.argument("package", type=click.Path(exists=True, path_type=Path))
@click.option("--tag", required=True, help="The image to build, e.g. localhost/clickstream:1.")
@click.option("--base", default=DEFAULT_BASE, show_default=True, help="The StreamApp image to build on (local).")
@click.option(
    "--find-links",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder of wheels for dependencies the base image lacks (repeatable).",
)
def build(package: Path, tag: str, base: str, find_links: tuple[Path, ...]) -> None:
    """Build image TAG: the base image with PACKAGE (a wheel, or a folder with a pyproject.toml) installed into
    its venv, offline, against the runtime's pinned dependencies.

    Refuses, before building, a package that requires another streamapp-runtime than the base image's, or a
    dependency the base image pins at another version, or one neither it nor --find-links provides.
    """
    try:
        built = build_app_image(package, tag, base, find_links, LocalTools())
    except (AppImageError, ToolError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"Built {built.tag}: {built.wheel.name} {built.wheel.version} on {built.base}.\n"
        f"Its manifest: streamapp manifest --topology {built.wheel.module_hint}.<module>:<function> --name <app> "
        f"--image {built.tag} --image-pull-policy Never ..."
    )


def build_app_image(package: Path, tag: str, base: str, find_links: Sequence[Path], tools: ImageTools) -> BuiltImage:
    """Build the app image ``tag`` of ``package`` on ``base`` with ``tools``; the build context (``Dockerfile``,
    ``wheels/``) is laid out in a temporary folder. Raises AppImageError listing every problem found before the
    build, ToolError when a tool fails."""
    check_tag(tag, base)
    with tempfile.TemporaryDirectory(prefix="streamapp-image-") as scratch:
        context = Path(scratch)
        wheels = context / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        wheel = read_wheel(_wheel_of(package, wheels, tools))
        extra = [path for folder in find_links for path in sorted(folder.glob("*.whl"))]
        problems = requirement_problems(
            wheel, image_facts(tools.probe(base)), wheel_versions(path.name for path in extra)
        )
        if problems:
            raise AppImageError("\n".join([f"{wheel.name} {wheel.version} cannot go into {base}:", *problems]))
        for path in extra:
            shutil.copy2(path, wheels / path.name)
        text = dockerfile(base, wheel, [path.name for path in extra])
        (context / "Dockerfile").write_text(text)
        tools.build(context, tag)
    return BuiltImage(tag, base, wheel, text)


def check_tag(tag: str, base: str) -> None:
    """Raises AppImageError when ``tag`` is not an image reference (a lower-case ``[host[:port]/]name[:tag]``) or
    would replace the base image."""
    name, tag_part = _split(tag)
    if not _NAME.match(name) or (tag_part is not None and not _TAG.match(tag_part)):
        raise AppImageError(f"--tag '{tag}' is not an image reference (lower-case name[:tag], e.g. localhost/myapp:1)")
    base_name, base_tag = _split(base)
    if name == base_name and (tag_part or "latest") == (base_tag or "latest"):
        raise AppImageError(f"--tag {tag} is the base image: give the app image a name of its own")


_NAME = re.compile(r"^[a-z0-9]+([._:/-][a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def _split(reference: str) -> tuple[str, str | None]:
    """``(name, tag)`` of an image reference; the tag is None when there is none (a ``:`` before the last ``/``
    is a registry's port)."""
    head, _, last = reference.rpartition("/")
    name, colon, tag_part = last.partition(":")
    return (f"{head}/{name}" if head else name), tag_part if colon else None


def _wheel_of(package: Path, wheels: Path, tools: ImageTools) -> Path:
    """``package`` copied into ``wheels`` when it is a wheel, else built there from its project folder."""
    if package.is_file():
        if package.suffix != ".whl":
            raise AppImageError(f"{package}: give a wheel (.whl) or a folder with a pyproject.toml")
        return Path(shutil.copy2(package, wheels / package.name))
    if not (package / "pyproject.toml").is_file():
        raise AppImageError(f"{package}: no pyproject.toml in it (give a wheel or a project folder)")
    with tempfile.TemporaryDirectory(prefix="streamapp-wheel-") as out:
        built = tools.build_wheel(package, Path(out))
        return Path(shutil.copy2(built, wheels / built.name))
