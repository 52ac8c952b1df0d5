"""The replay's stages: which sub-topology runs when, over which of its source topics (plain Python, no pyspark).

A stage runs one sub-topology's tasks once over the records of some of its source topics. Every sub-topology is one
stage, after every stage that writes a topic it reads, except the left table's sub-topology
of a foreign-key join (KIP-213), which is in a cycle: it writes the subscription registration topic the right
table's sub-topology reads, which writes the subscription response topic the left one reads. Its responses are
*deferred*: it runs twice,

1. over every source topic but the response topics (the left table's updates: they send the subscriptions), then,
   after the right table's sub-topology answered them,
2. over the response topics only (``Stage.resumes``): its tasks first restore their stores from what the first
   run's tasks wrote to their changelogs (the runtime's restore: ``ReplayTask``'s ``restored``), as a streaming
   task restarted after a commit would, then process the responses.

A response never leads to a subscription (``fk_response_join`` only forwards the joined table downstream), so two
runs reach the fixpoint: the second run writes nothing the right table's sub-topology reads. A topology where it
would (a cycle through another repartition topic) is refused (``UnsupportedTopologyError``), as is a node
downstream of the responses that needs the task's stream time (windowed, session, suppression or versioned stores,
Processor API nodes and their punctuation): the second run's tasks start with the stream time of the responses
only (docs/replay.md, "Foreign-key joins").
"""

from __future__ import annotations

from dataclasses import dataclass

from streamapp.replay.translate import UnsupportedTopologyError
from streamapp.topology import Subtopology, TopologyDescription
from streamapp.topology.nodes.joins import FkResponseJoinNode
from streamapp.topology.subtopologies import TopicRef

__all__ = ["Stage", "deferred_topics", "replay_stages"]

_STREAM_TIME_NODE_TYPES = frozenset({"process", "process_values"})
"""Node types that read the task's stream time without a store saying so (stream-time punctuation)."""


@dataclass(frozen=True)
class Stage:
    """One run of ``subtopology``'s tasks over the records of ``sources`` (a subset of its source topics).

    ``writes``: the internal topics this run may write (the sub-topology's, or for a resumed run only those
    downstream of the responses). ``resumes``: the second run of a foreign-key join's left sub-topology; its tasks
    restore their stores from the first run's changelog records before processing."""

    subtopology: Subtopology
    sources: tuple[TopicRef, ...]
    writes: frozenset[str]
    resumes: bool = False

    @property
    def id(self) -> int:
        return self.subtopology.id


def deferred_topics(description: TopologyDescription, application_id: str) -> dict[int, frozenset[str]]:
    """Sub-topology id -> the subscription response topics (KIP-213) it reads, for the sub-topologies that
    hold a ``fk_response_join``; ``{}`` without a foreign-key join."""
    response_nodes = {node.inputs()[1]: node.name for node in description.nodes if isinstance(node, FkResponseJoinNode)}
    deferred: dict[int, frozenset[str]] = {}
    for sub in description.subtopologies():
        read = {ref.resolve(application_id) for ref in sub.source_topics}
        topics = frozenset(description.repartition_topic(application_id, n) for n in response_nodes) & read
        if topics:
            deferred[sub.id] = topics
    return deferred


def replay_stages(description: TopologyDescription, application_id: str) -> list[Stage]:
    """The stages in an order where each comes after every stage that writes a topic it reads (see the module
    docstring; ties by sub-topology id, a first run before its resumed run).

    Raises UnsupportedTopologyError for a cycle between sub-topologies other than a foreign-key join's, or a
    foreign-key join whose responses reach a node that needs the task's stream time."""
    deferred = deferred_topics(description, application_id)
    stages: list[Stage] = []
    for sub in description.subtopologies():
        written = frozenset(ref.resolve(application_id) for ref in sub.sink_topics if ref.internal)
        later = deferred.get(sub.id, frozenset())
        first = tuple(ref for ref in sub.source_topics if ref.resolve(application_id) not in later)
        stages.append(Stage(sub, first, written))
        if later:
            resumed = tuple(ref for ref in sub.source_topics if ref.resolve(application_id) in later)
            stages.append(Stage(sub, resumed, _downstream_topics(description, application_id, sub, later), True))
    return _ordered(stages, application_id)


def _downstream_topics(
    description: TopologyDescription, application_id: str, sub: Subtopology, responses: frozenset[str]
) -> frozenset[str]:
    """The internal topics the nodes of ``sub`` downstream of the ``responses`` topics write; refuses a node
    there that needs the task's stream time."""
    starts = [n for n in sub.nodes if description.node(n).type == "repartition"]
    starts = [n for n in starts if description.repartition_topic(application_id, n) in responses]
    seen: set[str] = set()
    pending = [child for start in starts for child in description.children(start)]
    while pending:
        name = pending.pop()
        if name in seen or name not in sub.nodes:
            continue
        seen.add(name)
        pending.extend(description.children(name))
    topics: set[str] = set()
    for name in sorted(seen):
        node = description.node(name)
        timed = [s for s in node.stores() if description.store(s).type != "key_value"]
        if node.type in _STREAM_TIME_NODE_TYPES or timed:
            raise UnsupportedTopologyError(
                f"node '{name}' ({node.type}) is downstream of a foreign-key join's responses and needs the task's "
                "stream time, which the replay's second run of the join's left sub-topology does not carry over"
            )
        if node.type == "repartition":
            topics.add(description.repartition_topic(application_id, name))
    return frozenset(topics)


def _ordered(stages: list[Stage], application_id: str) -> list[Stage]:
    writers: dict[str, set[int]] = {}
    for index, stage in enumerate(stages):
        for topic in stage.writes:
            writers.setdefault(topic, set()).add(index)
    upstream: dict[int, set[int]] = {}
    for index, stage in enumerate(stages):
        needs = {w for ref in stage.sources for w in writers.get(ref.resolve(application_id), set())}
        if stage.resumes:  # its stores are the first run's
            needs |= {i for i, s in enumerate(stages) if s.id == stage.id and not s.resumes}
        upstream[index] = needs
    ordered: list[int] = []
    while len(ordered) < len(stages):
        ready = [i for i in range(len(stages)) if i not in ordered and upstream[i] <= set(ordered)]
        if not ready:
            raise _cycle([stages[i] for i in range(len(stages)) if i not in ordered], application_id)
        ordered.extend(ready)
    return [stages[i] for i in ordered]


def _cycle(stages: list[Stage], application_id: str) -> UnsupportedTopologyError:
    """The error for ``stages`` (those left) in a cycle, naming their sub-topologies and the topics they read."""
    subs = sorted({stage.id for stage in stages})
    topics = sorted({ref.resolve(application_id) for stage in stages for ref in stage.sources if ref.internal})
    return UnsupportedTopologyError(
        f"sub-topologies {subs} form a cycle through repartition topics {topics}; the replay runs a foreign-key "
        "join's left sub-topology twice (its updates, then the responses), so the records downstream of the "
        "responses may not reach a topic an earlier run reads (e.g. a foreign-key join of another one's result in "
        "the same sub-topology)"
    )
