"""The metadata a task commits with the offsets of its input partitions: the close time of the last emission of
each ``EmitStrategy.on_window_close()`` aggregation (KIP-825), so a task that moves or restarts resumes its final
results where the committed ones stopped (Kafka's ``ProcessorMetadata`` in ``TopicPartitionMetadata``, which
``AbstractKStreamTimeWindowAggregateProcessor`` / ``KStreamSessionWindowAggregate`` fill with
``addProcessorMetadataKeyValue(storeName, windowCloseTime)``).

Format (version 1): compact JSON ``{"v":1,"emit":{"<store>":<close time ms>}}``, keyed by the aggregation's store
name as Kafka keys it (the close time describes what that store's windows emitted), with only the stores that
emitted. Kafka's own layout (Base64 of a magic byte, the partition time and its binary ``ProcessorMetadata``) is not
used: the runtime restores no partition time from it, a runtime's commits are read only by the runtime, and JSON is
self-describing, readable where offsets are listed with their metadata (the Admin API's
``listConsumerGroupOffsets``) and versioned by its ``v``. Anything else (no
metadata, an older commit, another version, Kafka's layout) decodes to ``None``: the task then falls back to the
close time derived from its restored store (``streamapp.processors.windowed.base.FinalResults``).

A commit carries the task's metadata on every input partition it commits; a partition whose offset did not move is
not committed again and keeps an older value. Close times only grow, so the task takes the largest close time of
each store over its partitions' metadata, as Kafka's ``ProcessorMetadata.update`` does
(``StreamTask.initializeTaskTimeAndProcessorMetadata``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping

__all__ = ["MAX_METADATA_BYTES", "VERSION", "decode_emitted", "encode_emitted", "merge_emitted"]

log = logging.getLogger(__name__)

VERSION = 1
MAX_METADATA_BYTES = 4096
"""The broker's default ``offset.metadata.max.bytes``: a commit with longer metadata fails
(``OFFSET_METADATA_TOO_LARGE``), so a longer encoding is not committed (the task falls back as without metadata)."""


def encode_emitted(close_times: Mapping[str, int]) -> str | None:
    """The metadata of ``close_times`` (store name -> close time of its last emission, ms; -1, nothing emitted yet,
    is left out); ``None`` when it would exceed ``MAX_METADATA_BYTES`` (logged)."""
    emitted = {store: close for store, close in sorted(close_times.items()) if close >= 0}
    text = json.dumps({"v": VERSION, "emit": emitted}, separators=(",", ":"))
    if len(text.encode()) > MAX_METADATA_BYTES:
        log.warning(
            "The close times of %d emit-on-close stores take %d bytes, more than a commit's metadata holds (%d): "
            "they are not committed, a moved task derives them from its restored stores",
            len(emitted),
            len(text.encode()),
            MAX_METADATA_BYTES,
        )
        return None
    return text


def decode_emitted(metadata: str | None) -> dict[str, int] | None:
    """The close times (store name -> ms) a commit's metadata holds; ``None`` when it holds none of this version
    (empty, an older commit, another format)."""
    if not metadata or not metadata.startswith("{"):
        return None
    try:
        found = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(found, dict) or found.get("v") != VERSION or not isinstance(found.get("emit"), dict):
        return None
    emitted = found["emit"]
    if not all(isinstance(store, str) and type(close) is int for store, close in emitted.items()):
        return None
    return dict(emitted)


def merge_emitted(metadata: Iterable[str | None]) -> dict[str, int] | None:
    """The close times of a task from its input partitions' committed metadata: the largest per store; ``None``
    when no partition holds any (then the task derives them from its stores)."""
    merged: dict[str, int] | None = None
    for text in metadata:
        emitted = decode_emitted(text)
        if emitted is None:
            continue
        if merged is None:
            merged = {}
        for store, close in emitted.items():
            if close > merged.get(store, -1):
                merged[store] = close
    return merged
