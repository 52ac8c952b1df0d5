"""The ``stateless`` family on the replay: every node type runs in the task through the runtime's processors.
Candidates for Spark-native operators later (identical results: no state, one record at a time): filter/map
chains directly after a source."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.stateless import (
    BranchNode,
    FilterNode,
    FilterNotNode,
    FlatMapNode,
    FlatMapValuesNode,
    ForeachNode,
    MapNode,
    MapValuesNode,
    MergeNode,
    PeekNode,
    SelectKeyNode,
    SplitNode,
    ToStreamNode,
)

TRANSLATIONS = FamilyTranslations("stateless").in_task(
    FilterNode,
    FilterNotNode,
    MapNode,
    MapValuesNode,
    SelectKeyNode,
    FlatMapNode,
    FlatMapValuesNode,
    PeekNode,
    ForeachNode,
    MergeNode,
    ToStreamNode,
    SplitNode,
    BranchNode,
)
