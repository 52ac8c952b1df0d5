"""User functions referenced by import path (``"package.module:qualname"``).

A topology description never holds code, only references, so the operator can read it without the user's
image and the runtime imports the functions where they run. Resolution imports user code; it happens in
the runtime (and in ``streamapp topology export``), never during validation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from streamapp.topology.errors import TopologyError


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


def function_reference(fn: Callable[..., Any] | str) -> str:
    """The ``"module:qualname"`` reference of a module-level function (a string is checked and returned).

    Raises TopologyError for lambdas, nested functions, functions defined in ``__main__`` and objects
    whose reference does not resolve back to the same object: the runtime could not import them.
    """
    if isinstance(fn, str):
        module_part, sep, name_part = fn.partition(":")
        if not sep or not module_part or not name_part:
            raise TopologyError(f"function reference '{fn}' must look like 'package.module:function'")
        return fn
    module_name: str | None = getattr(fn, "__module__", None)
    qualname: str | None = getattr(fn, "__qualname__", None)
    shown = qualname or repr(fn)
    if not module_name or not qualname:
        raise TopologyError(
            f"{shown} has no module-level name; pass a module-level function or a 'module:function' string"
        )
    if "<lambda>" in qualname:
        raise TopologyError(
            f"a lambda in {module_name} cannot be exported: the runtime imports user functions by name; "
            "define a module-level function (def) and pass it instead"
        )
    if "<locals>" in qualname:
        raise TopologyError(
            f"function {qualname} in {module_name} is defined inside another function and cannot be "
            "imported by the runtime; move it to module level"
        )
    if module_name == "__main__":
        raise TopologyError(
            f"function {qualname} is defined in __main__, which the runtime cannot import; "
            "move it into an importable module"
        )
    ref = f"{module_name}:{qualname}"
    try:
        resolved = resolve_function(ref)
    except TopologyError as exc:
        raise TopologyError(f"function {qualname} cannot be exported: {exc}") from exc
    if resolved is not fn:
        raise TopologyError(
            f"function reference '{ref}' resolves to a different object than the function passed "
            "(a decorator without functools.wraps?); pass the module-level function itself"
        )
    return ref
