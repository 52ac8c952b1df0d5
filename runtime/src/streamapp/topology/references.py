"""Every ``module:attr`` reference of a topology description, imported at once before anything runs.

A description names user code in three places: the nodes' function parameters (``mapper``, ``predicate``, ...),
custom timestamp extractors (``timestampExtractor: {type: custom, function: ...}``) and Schema Registry serdes
(``avro:<module>:<schema>``, ``protobuf:<module>:<MessageClass>``). ``reference_problems`` imports them all and
reports every failure, so ``streamapp run`` names every broken reference in one error instead of one per start.
Importing is the only side effect (user modules run their top-level code).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from streamapp.serdes import SerdeError, registry_serde_name
from streamapp.topology.errors import TopologyError, problems_error
from streamapp.topology.functions import resolve_function, resolve_reference
from streamapp.topology.nodes.io import SourceNode

if TYPE_CHECKING:
    from streamapp.topology.description import TopologyDescription

__all__ = ["check_references", "reference_problems"]


def reference_problems(description: TopologyDescription) -> list[str]:
    """One line per reference of ``description`` that cannot be imported (``"node 'x': mapper: function
    reference 'm:f': cannot import module 'm': ..."``), in description order; ``[]`` when all resolve.

    Functions kept in-process with the description (``in_process_functions``) count as resolved.
    """
    try:
        description.resolve_functions()
        problems: list[str] = []
    except TopologyError as exc:
        problems = list(exc.problems)
    for where, ref in _extractor_references(description):
        try:
            resolve_function(ref)
        except TopologyError as exc:
            problems.append(f"{where}: timestampExtractor: {exc}")
    for where, serde, ref in _serde_references(description):
        try:
            resolve_reference(ref, f"serde '{serde}': reference")
        except TopologyError as exc:
            problems.append(f"{where}: {exc}")
    return problems


def check_references(description: TopologyDescription) -> None:
    """Raises one TopologyError listing every reference that cannot be imported (``reference_problems``)."""
    problems = reference_problems(description)
    if problems:
        raise problems_error(problems, "references to user code cannot be imported")


def _extractor_references(description: TopologyDescription) -> Iterator[tuple[str, str]]:
    for node in description.nodes:
        extractor = node.timestamp_extractor if isinstance(node, SourceNode) else None
        if extractor is not None and extractor.function is not None:
            yield f"node '{node.name}'", extractor.function


def _serde_references(description: TopologyDescription) -> Iterator[tuple[str, str, str]]:
    """``(where, serde name, module:attr)`` of every Schema Registry serde naming a schema or message class."""
    owners = [(f"node '{n.name}'", n) for n in description.nodes] + [
        (f"store '{s.name}'", s) for s in description.stores
    ]
    for where, owner in owners:
        for field in ("key_serde", "value_serde"):
            serde = getattr(owner, field, None)
            if not isinstance(serde, str):
                continue
            try:
                parsed = registry_serde_name(serde)
            except SerdeError:
                continue  # validation already refused a malformed name
            if parsed is not None and parsed.reference is not None:
                yield where, serde, parsed.reference
