"""Why a record was dropped: the small, closed set of reasons every engine counts by.

Kafka Streams counts skipped records in one task-level sensor, ``dropped-records``; StreamApp counts them by
reason, so that a late-data problem is not confused with a poison record. The streaming runtime (per task,
``/metrics`` ``streamapp_task_dropped_records_total{reason}``), the replay (its result JSON) and the operator
(``StreamApp.status.droppedRecords``, ``StreamReplay.status.droppedRecords``) use these names, so that the two
engines can be compared reason by reason.

==========================  =====================  ==============================================================
reason (label)              status key             what was dropped
==========================  =====================  ==============================================================
``late``                    ``late``               a record for a window or session that had closed (``windowEnd
                                                   + grace <= streamTime``), once per closed window as in Kafka;
                                                   a stream-stream join record older than its window store's
                                                   retention (joined with what the other side holds, but not kept
                                                   for later matches)
``null_key_or_value``       ``nullKeyOrValue``     a record with a null key (or a null value where the operation
                                                   needs one: aggregations, joins, table sources)
``invalid_timestamp``       ``invalidTimestamp``   a record without a valid timestamp: negative, or skipped by a
                                                   timestamp extractor with ``onInvalid: skip``
``deserialization_error``   ``deserializationError``  a record that could not be deserialized, skipped by the
                                                   deserialization exception handler (``log_and_continue``)
``processing_error``        ``processingError``    a record a processor (user code) or a sink failed on, skipped by
                                                   the processing or production exception handler
==========================  =====================  ==============================================================

Pure data, no imports: the operator and the replay read it too.
"""

from __future__ import annotations

__all__ = [
    "DESERIALIZATION_ERROR",
    "DROP_REASONS",
    "INVALID_TIMESTAMP",
    "LATE",
    "NULL_KEY_OR_VALUE",
    "PROCESSING_ERROR",
    "STATUS_KEYS",
    "status_counts",
]

LATE = "late"
NULL_KEY_OR_VALUE = "null_key_or_value"
INVALID_TIMESTAMP = "invalid_timestamp"
DESERIALIZATION_ERROR = "deserialization_error"
PROCESSING_ERROR = "processing_error"

DROP_REASONS: tuple[str, ...] = (LATE, NULL_KEY_OR_VALUE, INVALID_TIMESTAMP, DESERIALIZATION_ERROR, PROCESSING_ERROR)
"""Every reason, in the order documents list them."""

STATUS_KEYS: dict[str, str] = {
    LATE: "late",
    NULL_KEY_OR_VALUE: "nullKeyOrValue",
    INVALID_TIMESTAMP: "invalidTimestamp",
    DESERIALIZATION_ERROR: "deserializationError",
    PROCESSING_ERROR: "processingError",
}
"""A reason's key in a Kubernetes status (camelCase, the API conventions)."""


def status_counts(counts: dict[str, int]) -> dict[str, int]:
    """``{reason: n}`` as a status object: every reason under its status key (0 when absent), in
    ``DROP_REASONS`` order; unknown reasons are left out."""
    return {STATUS_KEYS[reason]: int(counts.get(reason, 0)) for reason in DROP_REASONS}
