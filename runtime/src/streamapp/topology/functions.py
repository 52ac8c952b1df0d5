"""User functions referenced by import path (``"package.module:qualname"``).

A topology description never holds code, only references, so the operator can read it without the user's
image and the runtime imports the functions where they run. Resolution imports user code; it happens in
the runtime (and in ``streamapp topology export``), never during validation.

**In-process functions.** A topology that runs in the process that built it (the TopologyTestDriver, a
notebook, a single-file script) may use functions no other process can import: lambdas, nested functions,
functions defined in ``__main__``. ``describe_function`` gives such a function a descriptive reference (its
``module:qualname``, e.g. ``tests.test_x:test_join.<locals>.<lambda>``) and the reason it cannot be exported;
the DSL keeps the function itself with the description (``TopologyDescription.in_process_functions``). Only
exporting the description (YAML / JSON: ``streamapp topology export``, a StreamApp spec, another process)
needs importable references, and refuses the others naming the node, the parameter and the reason.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamapp.topology.errors import TopologyError

__all__ = [
    "InProcessFunction",
    "describe_function",
    "function_reference",
    "in_process_reason",
    "resolve_function",
    "resolve_reference",
]

_IN_PROCESS_ONLY = "exists only in the process that built the topology"


@dataclass(frozen=True)
class InProcessFunction:
    """A user function kept with a description because no other process can import it by its reference."""

    function: Callable[..., Any]
    reason: str
    """Why it cannot be exported (``describe_function``), e.g. ``"a lambda in tests.test_x cannot be ..."``."""


def resolve_function(ref: str) -> Callable[..., Any]:
    """Import the callable that ``ref`` (``"module:attr"`` or ``"module:Outer.attr"``) names.

    Raises TopologyError saying which part failed: a malformed reference, a module that cannot be
    imported (with the import error), a missing attribute, or an attribute that is not callable.
    """
    module_name, sep, qualname = ref.partition(":")
    if not sep or not module_name or not qualname:
        raise TopologyError(f"function reference '{ref}' must look like 'package.module:function'")
    target = resolve_reference(ref)
    if not callable(target):
        raise TopologyError(f"function reference '{ref}': '{qualname}' is not callable")
    return target


def resolve_reference(ref: str, what: str = "function reference") -> Any:
    """Import the object ``ref`` (``"module:attr"`` or ``"module:Outer.attr"``) names (a function, an Avro schema,
    a message class, ...). Raises TopologyError, starting with ``"<what> '<ref>'"``, for a malformed reference, a
    module that cannot be imported (with the import error) or a missing attribute."""
    module_name, sep, qualname = ref.partition(":")
    if not sep or not module_name or not qualname:
        raise TopologyError(f"{what} '{ref}' must look like 'package.module:attr'")
    reason = in_process_reason(ref)
    if reason is not None and module_name != "__main__":
        raise TopologyError(
            f"{what} '{ref}' names a function that {_IN_PROCESS_ONLY} ({reason}); "
            "run the topology in that process (e.g. the TopologyTestDriver), or define the function at module level"
        )
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise TopologyError(f"{what} '{ref}': cannot import module '{module_name}': {exc}") from exc
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise TopologyError(f"{what} '{ref}': module '{module_name}' has no attribute '{qualname}'") from None
    return target


def in_process_reason(ref: str) -> str | None:
    """Why the function ``ref`` names can only exist in the process that built the topology (a lambda, a
    nested function, ``__main__``), or ``None`` when the reference may be imported elsewhere."""
    module_name, _, qualname = ref.partition(":")
    if "<lambda>" in qualname:
        return f"a lambda in {module_name} has no importable name"
    if "<locals>" in qualname:
        return f"function {qualname} in {module_name} is defined inside another function"
    if "<" in qualname:
        return f"{qualname} in {module_name} is not a module-level function"
    if module_name == "__main__":
        return f"function {qualname} is defined in __main__, which another process cannot import"
    return None


def function_reference(fn: Callable[..., Any] | str) -> str:
    """The ``"module:qualname"`` reference of a module-level function (a string is checked and returned).

    Raises TopologyError for lambdas, nested functions, functions defined in ``__main__`` and objects
    whose reference does not resolve back to the same object: another process could not import them.
    """
    ref, reason = describe_function(fn)
    if reason is not None:
        raise TopologyError(reason)
    return ref


def describe_function(fn: Callable[..., Any] | str) -> tuple[str, str | None]:
    """``fn``'s reference (``"module:qualname"``; a string is checked and returned) and, when no other process
    could import the function by it, the reason (else ``None``). Raises TopologyError for a malformed string."""
    if isinstance(fn, str):
        module_part, sep, name_part = fn.partition(":")
        if not sep or not module_part or not name_part:
            raise TopologyError(f"function reference '{fn}' must look like 'package.module:function'")
        return fn, None
    module_name: str | None = getattr(fn, "__module__", None)
    qualname: str | None = getattr(fn, "__qualname__", None)
    if not module_name or not qualname:
        kind = type(fn)
        shown = qualname or repr(fn)
        return f"{kind.__module__}:{kind.__qualname__}.<object>", (
            f"{shown} has no module-level name; pass a module-level function or a 'module:function' string"
        )
    ref = f"{module_name}:{qualname}"
    if "<lambda>" in qualname:
        return ref, (
            f"a lambda in {module_name} cannot be exported: a description imports user functions by name; "
            "define a module-level function (def) and pass it instead"
        )
    if "<locals>" in qualname:
        return ref, (
            f"function {qualname} in {module_name} is defined inside another function and cannot be "
            "imported by the runtime; move it to module level"
        )
    if module_name == "__main__":
        return ref, (
            f"function {qualname} is defined in __main__, which the runtime cannot import; "
            "move it into an importable module"
        )
    try:
        resolved = resolve_function(ref)
    except TopologyError as exc:
        return ref, f"function {qualname} cannot be exported: {exc}"
    if resolved is not fn:
        return ref, (
            f"function reference '{ref}' resolves to a different object than the function passed "
            "(a decorator without functools.wraps?); pass the module-level function itself"
        )
    return ref, None
