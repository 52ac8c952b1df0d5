"""Guarantees of the built image that a pod's securityContext cannot give: no setuid or setgid file is left
(nothing in the image can gain privileges, e.g. through ``su`` or ``mount``), and apt in the image knows
Debian's security updates (``bookworm-security``), from which ``hack/image/base.sh`` upgraded the base.

Runs ``find`` inside the image as ``hack/image/smoke.sh`` runs commands (a buildah working container,
``buildah run --isolation chroot``), as root so that no directory is unreadable to it. Needs the image
(``make image``); skipped when it or buildah is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

pytestmark = pytest.mark.e2e  # needs the built image

IMAGE = os.environ.get("STREAMAPP_IMAGE", "localhost/streamapp:dev")
BASE_IMAGE = "localhost/streamapp-base:bookworm"
#: Every regular file with the setuid or setgid bit, outside the kernel's file systems.
FIND_SETID = ["find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", "-o", "-path", "/dev", ")", "-prune",
              "-o", "-type", "f", "-perm", "/6000", "-print"]  # fmt: skip
#: As the rest of hack/image (lib.sh): images built with one storage driver are invisible to another.
ENV = {**os.environ, "STORAGE_DRIVER": os.environ.get("STORAGE_DRIVER", "overlay")}


def _image_exists(image: str) -> bool:
    done = subprocess.run(["podman", "image", "exists", image], env=ENV, capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture(scope="module", autouse=True)
def _buildah() -> None:
    if shutil.which("buildah") is None or shutil.which("podman") is None:
        pytest.skip("buildah/podman not installed (hack/image/setup.sh)")


def run_in(image: str, *command: str) -> str:
    """stdout of ``command`` run as root in a working container of ``image``."""
    if not _image_exists(image):
        pytest.skip(f"{image} not built (make image)")
    container = f"streamapp-imagetest-{uuid.uuid4().hex[:8]}"
    subprocess.run(["buildah", "from", "--pull-never", "--name", container, image], env=ENV, check=True,
                   capture_output=True)  # fmt: skip
    try:
        done = subprocess.run(
            ["buildah", "run", "--isolation", "chroot", "--network", "host", "--user", "0:0", container, "--",
             *command],
            env=ENV, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        subprocess.run(["buildah", "rm", container], env=ENV, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def setid_files() -> list[str]:
    return run_in(IMAGE, *FIND_SETID).split()


def test_image_has_no_setuid_or_setgid_file(setid_files: list[str]) -> None:
    assert setid_files == []


def test_the_base_image_has_setuid_files_the_image_strips() -> None:
    """The same search finds su, mount and passwd in the base: the check above really looks."""
    found = run_in(BASE_IMAGE, *FIND_SETID).split()
    assert {"/usr/bin/su", "/usr/bin/mount", "/usr/bin/passwd"} <= set(found)


def test_image_apt_sources_include_the_security_updates() -> None:
    sources = run_in(IMAGE, "sh", "-c", "cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null; true")
    suites = set()
    for line in sources.splitlines():
        words = line.split()
        if words[:1] == ["Suites:"]:  # deb822
            suites.update(words[1:])
        elif words[:1] == ["deb"] and len(words) > 2:  # one-line: deb URI SUITE COMPONENTS
            suites.add(words[2])
    assert {"bookworm", "bookworm-updates", "bookworm-security"} <= suites
