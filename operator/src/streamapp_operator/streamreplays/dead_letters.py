"""A replay's dead letters go to a topic of its own (pure decisions).

The app's ``spec.config`` may name a dead-letter topic (``errors.dead.letter.queue.topic.name``, KIP-1034: where the
``dead_letter_queue`` exception handlers write a record they skip). A replay that wrote its dead letters there would
put the history's failed records a second time into the live app's dead-letter topic, among the live ones. So the
replay's Kafka Streams config names :func:`topic` instead, ``<the replay's application.id>-dlq``: the operator
creates it with the replay's output topics (as many partitions as the live one, else as the input; the output's
retention: dead letters keep their source record's timestamp) and, when the replay ends, deletes it if it is
empty, else keeps it and names it in ``status.deadLetterTopic`` with ``status.deadLetters`` (:func:`verdict`).
The new version of a handover runs with the app's config: its own dead letters go to the live topic again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Kafka Streams' setting of the dead-letter topic (KIP-1034).
DLQ_KEY = "errors.dead.letter.queue.topic.name"
SUFFIX = "-dlq"


def topic(app_config: Mapping[str, str], application_id: str) -> str | None:
    """The replay's dead-letter topic, ``<application_id>-dlq``; None when the app names no dead-letter topic (no
    handler of the replay can write one)."""
    return f"{application_id}{SUFFIX}" if app_config.get(DLQ_KEY) else None


def live_topic(app_config: Mapping[str, str]) -> str | None:
    """The app's own dead-letter topic (whose partition count the replay's takes), if it names one."""
    return app_config.get(DLQ_KEY) or None


@dataclass(frozen=True)
class Verdict:
    """What happens to the replay's dead-letter topic when the replay ends: ``delete`` it (empty), or keep it with
    ``records`` dead letters, ``message`` saying so (a Warning event)."""

    delete: bool
    records: int = 0
    message: str = ""


def verdict(name: str, offsets: int, records: int | None = None) -> Verdict:
    """``offsets``: the topic's end minus start offsets over its partitions (0: nothing was ever written);
    ``records``: the dead letters a ``read_committed`` reader sees (counted only when ``offsets`` > 0; 0 when all
    that was written were aborted writes and transaction markers). An empty topic goes; one with records stays and
    is named, never deleted silently."""
    if offsets == 0 or records == 0:
        return Verdict(delete=True)
    count = records if records is not None else offsets
    return Verdict(
        delete=False,
        records=count,
        message=f"the replay wrote {count} dead letters to {name}: kept (delete the topic once they are dealt with)",
    )
