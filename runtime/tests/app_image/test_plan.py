"""The decisions of ``streamapp image build``: a wheel's requirements are met by the base image's own
distributions (a different ``streamapp-runtime`` or a different pin of the runtime's dependencies is refused, with
a message saying what to change) or by ``--find-links`` wheels, markers are evaluated for the image's
interpreter, and the Dockerfile installs the wheel offline into the venv and gives the image back to its
non-root user."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from streamapp.app_image import plan
from streamapp.app_image.plan import AppImageError, ImageFacts, Wheel, requirement_problems

IMAGE = plan.image_facts(
    {
        "distributions": {"streamapp-runtime": "0.1.0", "PyYAML": "6.0.3", "pydantic_core": "2.50.4"},
        "environment": {"python_version": "3.11", "sys_platform": "linux"},
    }
)


def _wheel(*requires: str) -> Wheel:
    return Wheel(Path("clicks-1.0-py3-none-any.whl"), "clicks", "1.0", requires)


def test_a_wheel_needing_only_what_the_image_has_has_no_problem() -> None:
    wheel = _wheel("streamapp-runtime==0.1.0", "pyyaml>=6", "Pydantic-Core", "tomli; python_version < '3.11'")

    assert requirement_problems(wheel, IMAGE, {}) == []


def test_another_streamapp_runtime_than_the_images_is_refused_with_what_to_change() -> None:
    [problem] = requirement_problems(_wheel("streamapp-runtime==0.2.0"), IMAGE, {})

    assert "clicks requires streamapp-runtime==0.2.0, but the base image has streamapp-runtime 0.1.0" in problem
    assert "--base" in problem


def test_a_dependency_pinned_by_the_runtime_cannot_be_moved() -> None:
    [problem] = requirement_problems(_wheel("pyyaml<6"), IMAGE, {})

    assert "pins pyyaml 6.0.3 for the runtime" in problem


def test_a_dependency_the_image_lacks_must_come_from_find_links_at_a_matching_version() -> None:
    wheel = _wheel("ua-parser>=1.0", "dateparser==1.2")
    provided = plan.wheel_versions(["ua_parser-1.0.1-py3-none-any.whl", "dateparser-1.1-py3-none-any.whl", "x.tar.gz"])

    problems = requirement_problems(wheel, IMAGE, provided)

    assert provided == {"ua-parser": ["1.0.1"], "dateparser": ["1.1"]}
    assert len(problems) == 1
    assert "clicks requires dateparser==1.2, which the base image does not have" in problems[0]
    assert "--find-links" in problems[0]


def test_every_problem_is_reported_at_once() -> None:
    problems = requirement_problems(_wheel("streamapp-runtime>=0.2", "pyyaml<6", "missing-dep", "!!"), IMAGE, {})

    assert len(problems) == 4


def test_read_wheel_takes_name_version_and_requirements_from_the_metadata(tmp_path: Path) -> None:
    path = tmp_path / "clicks-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("clicks/__init__.py", "")
        archive.writestr(
            "clicks-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: clicks\nVersion: 1.0\nRequires-Dist: streamapp-runtime==0.1.0\n"
            "Requires-Dist: pyyaml>=6\n\nA long description.\n",
        )

    wheel = plan.read_wheel(path)

    assert (wheel.name, wheel.version, wheel.requires) == ("clicks", "1.0", ("streamapp-runtime==0.1.0", "pyyaml>=6"))


@pytest.mark.parametrize("member", [None, "clicks/__init__.py"], ids=["not-a-zip", "zip-without-metadata"])
def test_a_file_that_is_not_a_wheel_is_refused(tmp_path: Path, member: str | None) -> None:
    path = tmp_path / "clicks-1.0-py3-none-any.whl"
    if member is None:
        path.write_bytes(b"PK not really")
    else:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(member, "")

    with pytest.raises(AppImageError, match="not a wheel"):
        plan.read_wheel(path)


def test_the_dockerfile_installs_offline_into_the_venv_and_runs_as_the_non_root_user() -> None:
    text = plan.dockerfile("localhost/streamapp:dev", _wheel(), ["ua_parser-1.0.1-py3-none-any.whl"])
    lines = text.splitlines()

    assert "ARG BASE_IMAGE=localhost/streamapp:dev" in lines
    assert "FROM ${BASE_IMAGE}" in lines
    assert "--no-index" in text and "--find-links /tmp/app-wheels /tmp/app-wheels/clicks-1.0-py3-none-any.whl" in text
    assert "/opt/streamapp/venv/bin/pip check" in text
    assert lines.index("USER 0:0") < lines.index("USER 10001:10001")
    assert [line for line in lines if line.startswith("USER")][-1] == "USER 10001:10001"
    assert "#   ua_parser-1.0.1-py3-none-any.whl" in lines


def test_image_facts_canonicalize_distribution_names() -> None:
    facts = plan.image_facts({"distributions": {"PyYAML": "6.0.3", "typing_extensions": "4"}, "environment": {}})

    assert facts == ImageFacts({"pyyaml": "6.0.3", "typing-extensions": "4"}, {})
