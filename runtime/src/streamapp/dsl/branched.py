"""BranchedKStream: the branches of a ``KStream.split()`` (Kafka's ``BranchedKStreamImpl``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streamapp.dsl.builder import UserFunction

if TYPE_CHECKING:
    from streamapp.dsl.streams import KStream

__all__ = ["BranchedKStream"]


class BranchedKStream:
    """Collects the branches of a split. A record goes to the first branch whose predicate holds (in the
    order of ``branch`` calls), else to the default branch, else nowhere.

    Branch names follow Kafka: ``<split name><name>``, or ``<split name><index>`` (1-based for ``branch``,
    0 for the default branch) when ``name`` is not given. ``chain(stream) -> KStream | None`` (Kafka's
    ``Branched.withFunction``) continues a branch in place; its result (when not ``None``) is the branch's
    entry in the returned dict.
    """

    def __init__(self, source: KStream, split_node: str) -> None:
        self._source = source
        self._split = split_node
        self._count = 0
        self._branches: dict[str, KStream] = {}
        self._closed = False

    def branch(
        self,
        predicate: UserFunction,
        *,
        name: str | None = None,
        chain: Callable[[KStream], KStream | None] | None = None,
    ) -> BranchedKStream:
        """Add a branch for the records ``predicate(key, value)`` holds for (and no earlier branch took)."""
        self._count += 1
        self._add(predicate, name, self._count, chain)
        return self

    def default_branch(
        self, *, name: str | None = None, chain: Callable[[KStream], KStream | None] | None = None
    ) -> dict[str, KStream]:
        """Add the branch for every record no other branch took; returns all branches by name."""
        self._add(None, name, 0, chain)
        return self.no_default_branch()

    def no_default_branch(self) -> dict[str, KStream]:
        """Finish without a default branch (unmatched records are dropped); returns all branches by name."""
        self._closed = True
        return dict(self._branches)

    def _add(
        self,
        predicate: UserFunction | None,
        name: str | None,
        index: int,
        chain: Callable[[KStream], KStream | None] | None,
    ) -> None:
        from streamapp.topology import TopologyError

        if self._closed:
            raise TopologyError(f"node '{self._split}': the split already has its default branch or was finished")
        branch_name = f"{self._split}{name if name is not None else index}"
        node = self._source._builder._add("branch", branch_name, "", input=self._split, predicate=predicate)
        stream = self._source._next(node)
        result = chain(stream) if chain is not None else stream
        if result is not None:
            self._branches[branch_name] = result
