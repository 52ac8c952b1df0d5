"""Runs in the pods of a replay Job, not in the operator: the app image's code into the replay's Python path.

The operator ships this file's text in the replay's ConfigMap (``app_code.py``,
``streamapp_operator.streamreplays.app_code``) and runs it with the Python of each image, so it imports the
standard library only.

- ``python app_code.py copy DEST`` (the init container ``app-code``, in the app's image): copies the user's
  installed code into ``DEST/site-packages`` (an emptyDir) and writes ``DEST/streamapp-app-code.json`` with the
  image's ``streamapp-runtime`` version and Python ``major.minor``. What is copied: the top-level entries of the
  site-packages directory ``streamapp-runtime`` is installed in (packages, modules, ``.pth`` files, ``*.dist-info``
  folders, also code copied there without a wheel), except those of the *platform*: ``streamapp-runtime``,
  ``streamapp-operator``, ``pip``, ``setuptools``, ``wheel`` and every distribution they require, extras included
  (``pyspark``, ``pyarrow``, ``pandas`` of the ``replay`` extra). An image that declares its code folder with
  ``STREAMAPP_APP_CODE=/path`` has that folder copied instead, whole.
- ``python app_code.py check DEST [PLAN]`` (before ``streamapp replay run``, in the replay image): the copied code's
  ``streamapp-runtime`` and Python must be the replay image's; else it prints ``Error: RuntimeVersionMismatch: ...``
  and exits :data:`MISMATCH_EXIT`. Then every function reference of the plan's topology must import with that
  code first on the path (the runtime's own ``TopologyDescription.resolve_functions``, what the Spark tasks call);
  else it prints ``Error: FunctionNotImportable: ...`` naming each function and exits :data:`NOT_IMPORTABLE_EXIT`.
  Either way the Job's pod failure policy fails the Job at once, no retry, and the line is also the container's
  termination message (``/dev/termination-log``, which the kubelet puts in the pod's status).

The replay container puts ``DEST/site-packages`` first on ``PYTHONPATH``: the user's code wins over a copy of it
in the replay image (the flights example is in both), the platform is never copied, so ``streamapp`` and its
dependencies are always the replay image's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

RUNTIME = "streamapp-runtime"
#: Distributions the replay image brings itself, with everything they require: never copied.
PLATFORM = (RUNTIME, "streamapp-operator", "pip", "setuptools", "wheel")
MANIFEST = "streamapp-app-code.json"
SITE = "site-packages"
#: The image declares its code folder (copied whole instead of the site-packages' user entries).
DECLARED = "STREAMAPP_APP_CODE"
#: The replay's condition reason, and the check's exit code (EX_CONFIG) the Job's pod failure policy matches.
MISMATCH = "RuntimeVersionMismatch"
MISMATCH_EXIT = 78
#: The replay's condition reason, and the check's exit code (EX_DATAERR), when a topology function does not import.
NOT_IMPORTABLE = "FunctionNotImportable"
NOT_IMPORTABLE_EXIT = 65
#: Where a container's termination message goes (Kubernetes' default ``terminationMessagePath``).
TERMINATION_LOG = Path("/dev/termination-log")


def normalized(name: str) -> str:
    """PEP 503's normalized distribution name (``Streamapp_Runtime`` -> ``streamapp-runtime``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def platform_names(dists: Iterable[metadata.Distribution]) -> set[str]:
    """Normalized names of :data:`PLATFORM` and of every installed distribution they require: all extras of the
    project's own (``streamapp-runtime[replay]``: ``pyspark[sql]``), then the extras each requirement names
    (``pyspark[sql]``: pyarrow, pandas, numpy), no others (pytest's test extras are no requirement of the
    platform). Other environment markers are not evaluated: a requirement not installed is not there to copy."""
    by_name = {normalized(d.metadata["Name"]): d for d in dists if d.metadata["Name"]}
    # None: every extra (the project's own distributions); pip, setuptools and wheel with none
    todo: list[tuple[str, frozenset[str] | None]] = [
        (normalized(n), None if n.startswith("streamapp-") else frozenset()) for n in PLATFORM
    ]
    seen: set[tuple[str, frozenset[str] | None]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        dist = by_name.get(name)
        for requirement in (dist.requires or []) if dist is not None else []:
            found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", requirement)
            if found is None:
                continue
            wanted = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement.partition(";")[2])
            if wanted and extras is not None and not {normalized(w) for w in wanted} & extras:
                continue
            named = frozenset(normalized(e) for e in (found.group(2) or "").split(",") if e.strip())
            todo.append((normalized(found.group(1)), named))
    return {name for name, _ in seen}


def platform_entries(dists: Iterable[metadata.Distribution], site: Path) -> set[str]:
    """Top-level entries of ``site`` that platform distributions own (their RECORD's files there)."""
    dists = list(dists)
    names = platform_names(dists)
    owned: set[str] = set()
    for dist in dists:
        if normalized(dist.metadata["Name"] or "") not in names:
            continue
        for file in dist.files or []:
            path = Path(str(dist.locate_file(file))).resolve()
            if path.parent == site.resolve() or site.resolve() in path.parents:
                owned.add(path.relative_to(site.resolve()).parts[0])
    return owned


def user_entries(site: Path, dists: Iterable[metadata.Distribution]) -> list[Path]:
    """The entries of ``site`` to copy: all but the platform's and ``__pycache__``, sorted by name."""
    owned = platform_entries(dists, site) | {"__pycache__"}
    return sorted((p for p in site.iterdir() if p.name not in owned), key=lambda p: p.name)


def runtime_site() -> Path:
    """The site-packages directory ``streamapp-runtime`` is installed in."""
    return Path(str(metadata.distribution(RUNTIME).locate_file(""))).resolve()


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def installed_runtime(site: Path) -> str:
    """The version of ``streamapp-runtime`` installed in ``site`` (the image's, which the user's code runs with)."""
    for dist in metadata.distributions(path=[str(site)]):
        if normalized(dist.metadata["Name"] or "") == RUNTIME:
            return dist.version
    return metadata.version(RUNTIME)


def copy(dest: Path, site: Path | None = None, declared: str | None = None) -> dict[str, object]:
    """Copy the image's user code (of ``site``, default :func:`runtime_site`; or the folder ``declared``) into
    ``dest/site-packages`` and write the manifest ``dest/streamapp-app-code.json``; returns the manifest."""
    site = site or runtime_site()
    target = dest / SITE
    target.mkdir(parents=True, exist_ok=True)
    if declared:
        entries = sorted(Path(declared).iterdir(), key=lambda p: p.name)
    else:
        entries = user_entries(site, metadata.distributions(path=[str(site)]))
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target / entry.name, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(entry, target / entry.name, follow_symlinks=False)
    manifest: dict[str, object] = {
        "streamappRuntime": installed_runtime(site),
        "python": python_version(),
        "source": declared or str(site),
        "copied": [entry.name for entry in entries],
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, sort_keys=True))
    return manifest


def mismatch(manifest: dict[str, object], runtime: str, python: str) -> str | None:
    """Why the copied code cannot run in this image (``streamapp-runtime`` or Python differ), or None."""
    theirs = (manifest.get("streamappRuntime"), manifest.get("python"))
    if theirs == (runtime, python):
        return None
    return (
        f"{MISMATCH}: the app image has streamapp-runtime {theirs[0]} on Python {theirs[1]}, the replay image "
        f"streamapp-runtime {runtime} on Python {python}: the user code runs with the replay image's streamapp, so "
        "they must be the same; build the app image FROM the project image of the replay image's version, or set "
        "spec.spark.image to a replay image of the app image's version"
    )


def not_importable(plan: Path) -> str | None:
    """Why the topology of the replay plan ``plan`` (YAML, ``topology`` in ``TopologyDescription.from_dict``'s
    form) cannot run here: its functions that do not import (each named with its node and the import error), or
    None. Imports the user's code, in the replay image (``streamapp`` and ``pyyaml`` are there)."""
    import yaml
    from streamapp.topology import TopologyDescription, TopologyError

    description = TopologyDescription.from_dict(yaml.safe_load(plan.read_text())["topology"])
    try:
        description.resolve_functions()
    except TopologyError as exc:
        return f"{NOT_IMPORTABLE}: {exc}"
    return None


def _refuse(why: str, code: int, termination_log: Path) -> int:
    """Say ``why`` on stderr and as the termination message, when ``termination_log`` exists (the kubelet mounts it
    into every container; not every node does, and outside a pod it is not there); return ``code``."""
    print(f"Error: {why}", file=sys.stderr)
    try:
        if termination_log.is_file():
            termination_log.write_text(why[:4096])  # the kubelet keeps at most 4096 bytes
    except OSError:
        pass
    return code


def check(
    dest: Path, runtime: str | None = None, plan: Path | None = None, termination_log: Path = TERMINATION_LOG
) -> int:
    """0 when the code copied into ``dest`` runs with this image's ``streamapp`` (``runtime``: its version, default
    the installed one) and, with ``plan``, imports every function of its topology; else :data:`MISMATCH_EXIT` or
    :data:`NOT_IMPORTABLE_EXIT` (1: nothing was copied)."""
    path = dest / MANIFEST
    if not path.exists():
        print(f"Error: {path} is missing: the init container app-code did not copy the app's code", file=sys.stderr)
        return 1
    manifest = json.loads(path.read_text())
    why = mismatch(manifest, runtime or metadata.version(RUNTIME), python_version())
    if why is not None:
        return _refuse(why, MISMATCH_EXIT, termination_log)
    why = not_importable(plan) if plan is not None else None
    if why is not None:
        return _refuse(why, NOT_IMPORTABLE_EXIT, termination_log)
    copied = manifest.get("copied") or []
    print(f"app code: {len(copied)} entries of {manifest.get('source')} on PYTHONPATH", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if not ((argv[:1] == ["copy"] and len(argv) == 2) or (argv[:1] == ["check"] and len(argv) in (2, 3))):
        print("usage: app_code.py copy DEST | check DEST [PLAN]", file=sys.stderr)
        return 2
    dest = Path(argv[1])
    if argv[0] == "check":
        return check(dest, plan=Path(argv[2]) if len(argv) == 3 else None)
    manifest = copy(dest, declared=os.environ.get(DECLARED) or None)
    copied = manifest["copied"]
    assert isinstance(copied, list)
    print(f"app code: copied {len(copied)} entries of {manifest['source']}: {', '.join(copied)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
