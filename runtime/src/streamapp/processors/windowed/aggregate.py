"""The builder of the windowed aggregation nodes (``windowed_count`` / ``windowed_reduce`` /
``windowed_aggregate``): count and reduce as ``(initializer, aggregator, merger)``, and the processor of the
node's window kind (``time_windows``, ``sliding``, ``session``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, FamilyBuilders, Processor
from streamapp.processors.windowed.base import Aggregator, Initializer, Merger
from streamapp.processors.windowed.session import SessionWindowAggregateProcessor
from streamapp.processors.windowed.sliding import SlidingWindowAggregateProcessor
from streamapp.processors.windowed.time_windows import TimeWindowAggregateProcessor
from streamapp.state.caching_window_store import CachingSlidingWindowStore, CachingWindowStore
from streamapp.topology.nodes.windowed import (
    WindowedAggregateNode,
    WindowedAggregationNode,
    WindowedCountNode,
    WindowedReduceNode,
)

__all__ = ["BUILDERS", "build_windowed_aggregation"]

BUILDERS = FamilyBuilders("windowed")


# -- count / reduce / aggregate as (initializer, aggregator, merger) ----------------------------------------


def _count_initializer() -> int:
    return 0


def _count_aggregator(key: Any, value: Any, aggregate: int) -> int:
    return aggregate + 1


def _count_merger(key: Any, first: int, second: int) -> int:
    return first + second


def _reduce_functions(reducer: Callable[[Any, Any], Any]) -> tuple[Initializer, Aggregator, Merger]:
    def aggregator(key: Any, value: Any, aggregate: Any) -> Any:
        return value if aggregate is None else reducer(aggregate, value)

    def merger(key: Any, first: Any, second: Any) -> Any:
        return aggregator(key, second, first)

    return (lambda: None), aggregator, merger


def _functions(node: WindowedAggregationNode, ctx: BuildContext) -> tuple[Initializer, Aggregator, Merger | None]:
    if isinstance(node, WindowedCountNode):
        return _count_initializer, _count_aggregator, _count_merger
    if isinstance(node, WindowedReduceNode):
        return _reduce_functions(ctx.function(node.name, "reducer"))
    assert isinstance(node, WindowedAggregateNode)
    merger = ctx.function(node.name, "merger") if node.merger is not None else None
    return ctx.function(node.name, "initializer"), ctx.function(node.name, "aggregator"), merger


@BUILDERS.builds(WindowedCountNode, WindowedReduceNode, WindowedAggregateNode)
def build_windowed_aggregation(
    node: WindowedAggregationNode, children: Sequence[Processor], ctx: BuildContext
) -> Processor:
    """The processor of a ``windowed_count`` / ``windowed_reduce`` / ``windowed_aggregate`` node."""
    processor = _build(node, children, ctx)
    if processor.final_results is not None:
        ctx.final_results[node.store] = processor.final_results
    return processor


def _build(
    node: WindowedAggregationNode, children: Sequence[Processor], ctx: BuildContext
) -> SessionWindowAggregateProcessor | SlidingWindowAggregateProcessor | TimeWindowAggregateProcessor:
    initializer, aggregator, merger = _functions(node, ctx)
    windows = node.windows
    if windows.type == "session":
        assert merger is not None
        return SessionWindowAggregateProcessor(
            node.name,
            ctx.cached_session_store(node.store),
            windows,
            initializer,
            aggregator,
            merger,
            children,
            ctx.metrics,
            emit_on_close=node.emits_on_window_close,
        )
    store = ctx.cached_window_store(node.store)
    if windows.type == "sliding":
        assert not isinstance(store, CachingWindowStore) or isinstance(store, CachingSlidingWindowStore)
        kind: type[SlidingWindowAggregateProcessor | TimeWindowAggregateProcessor] = SlidingWindowAggregateProcessor
    else:
        kind = TimeWindowAggregateProcessor
    return kind(
        node.name,
        store,  # type: ignore[arg-type]
        windows,
        initializer,
        aggregator,
        children,
        ctx.metrics,
        emit_on_close=node.emits_on_window_close,
    )
