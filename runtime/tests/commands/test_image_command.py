"""``streamapp image build`` decides before it builds: the build context holds the user's wheel (built from a
project folder when given one) and the ``--find-links`` wheels, the Dockerfile it writes passes hadolint, the
image gets the asked tag, and a package the base image cannot take, or a tag that would replace the base image,
stops it before any build. The tools are a hand-written fake of the ``ImageTools`` seam; the real build with
podman is ``test_image_build_with_podman.py``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamapp.app_image.plan import AppImageError
from streamapp.cli import main
from streamapp.commands.image import build_app_image, check_tag

BASE = "localhost/streamapp:dev"


def _write_wheel(folder: Path, name: str, version: str, *requires: str) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        archive.writestr(
            f"{name}-{version}.dist-info/METADATA", metadata + "".join(f"Requires-Dist: {r}\n" for r in requires)
        )
    return path


class FakeTools:
    """Records what the command asks; the base image has the runtime 0.1.0 and PyYAML."""

    def __init__(self, wheel_source: Path | None = None) -> None:
        self.wheel_source = wheel_source
        self.built: list[tuple[str, str, list[str]]] = []
        self.wheels_built: list[Path] = []

    def build_wheel(self, project: Path, out_dir: Path) -> Path:
        assert self.wheel_source is not None
        self.wheels_built.append(project)
        return Path(shutil.copy2(self.wheel_source, out_dir / self.wheel_source.name))

    def probe(self, image: str) -> dict[str, dict[str, str]]:
        assert image == BASE
        return {
            "distributions": {"streamapp-runtime": "0.1.0", "PyYAML": "6.0.3"},
            "environment": {"python_version": "3.11"},
        }

    def build(self, context: Path, tag: str) -> None:
        files = sorted(str(p.relative_to(context)) for p in context.rglob("*") if p.is_file())
        self.built.append((tag, (context / "Dockerfile").read_text(), files))


def test_a_wheel_and_the_find_links_wheels_are_the_build_context(tmp_path: Path) -> None:
    wheel = _write_wheel(tmp_path, "clicks", "1.0", "streamapp-runtime==0.1.0", "ua-parser>=1")
    extra = tmp_path / "extra"
    extra.mkdir()
    _write_wheel(extra, "ua_parser", "1.0.1")
    tools = FakeTools()

    built = build_app_image(wheel, "localhost/clicks:1", BASE, [extra], tools)

    [(tag, text, files)] = tools.built
    assert tag == "localhost/clicks:1"
    assert files == ["Dockerfile", "wheels/clicks-1.0-py3-none-any.whl", "wheels/ua_parser-1.0.1-py3-none-any.whl"]
    assert text == built.dockerfile
    assert "/tmp/app-wheels/clicks-1.0-py3-none-any.whl" in text


def test_a_project_folder_is_built_into_a_wheel_first(tmp_path: Path) -> None:
    project = tmp_path / "clicks"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'clicks'\n")
    tools = FakeTools(_write_wheel(tmp_path, "clicks", "1.0", "streamapp-runtime"))

    built = build_app_image(project, "localhost/clicks:1", BASE, [], tools)

    assert tools.wheels_built == [project]
    assert built.wheel.name == "clicks"
    assert tools.built[0][2] == ["Dockerfile", "wheels/clicks-1.0-py3-none-any.whl"]


def test_another_runtime_version_stops_the_command_before_any_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = _write_wheel(tmp_path, "clicks", "1.0", "streamapp-runtime==0.2.0")
    tools = FakeTools()
    monkeypatch.setattr("streamapp.commands.image.LocalTools", lambda: tools)

    result = CliRunner().invoke(main, ["image", "build", str(wheel), "--tag", "localhost/clicks:1"])

    assert result.exit_code == 1
    assert "Error: clicks 1.0 cannot go into localhost/streamapp:dev:" in result.output
    assert "requires streamapp-runtime==0.2.0, but the base image has streamapp-runtime 0.1.0" in result.output
    assert tools.built == []


def test_a_folder_without_pyproject_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AppImageError, match=r"no pyproject\.toml"):
        build_app_image(tmp_path, "localhost/clicks:1", BASE, [], FakeTools())


def test_the_base_image_cannot_be_the_tag() -> None:
    with pytest.raises(AppImageError, match="is the base image"):
        check_tag("localhost/streamapp:dev", BASE)


@pytest.mark.parametrize("tag", ["Localhost/Clicks:1", "clicks app", "", "clicks:"])
def test_a_tag_that_is_not_an_image_reference_is_refused(tag: str) -> None:
    with pytest.raises(AppImageError, match="not an image reference"):
        check_tag(tag, BASE)


@pytest.mark.parametrize("tag", ["localhost/clicks:1", "localhost:5000/team/clicks", "clicks:V1.2_rc"])
def test_image_references_with_registry_ports_and_tags_are_accepted(tag: str) -> None:
    check_tag(tag, BASE)


def test_the_generated_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    tools = FakeTools()
    build_app_image(_write_wheel(tmp_path, "clicks", "1.0"), "localhost/clicks:1", BASE, [], tools)
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(tools.built[0][1])
    hadolint = Path(sys.executable).parent / "hadolint"

    done = subprocess.run([str(hadolint), "--no-color", str(dockerfile)], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stdout + done.stderr
