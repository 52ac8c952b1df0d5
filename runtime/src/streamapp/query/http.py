"""The instance HTTP server's query routes (served next to /healthz, /metrics and /status on ``http.port``).

- ``POST /query`` with a JSON ``StateQueryRequest`` (``streamapp.query.requests.StateQueryRequest.to_dict``:
  ``{"store": ..., "type": "key" | "range" | "window_key" | "window_range", "key": ..., "lower": ...,
  "upper": ..., "time_from": ms, "time_to": ms, "partitions": [...], "require_active": bool,
  "position_bound": {topic: {partition: offset}}}``): the whole application's ``StateQueryResult`` as JSON
  (``InteractiveQueries.query``); ``?local=true`` answers from this instance's stream threads only (what another
  instance forwards);
- ``GET /metadata``: every instance's ``StreamsMetadata`` (``KafkaStreams#metadataForAllStreamsClients``);
- ``GET /metadata/key?store=<name>&key=<JSON>``: ``KeyQueryMetadata`` (``KafkaStreams#queryMetadataForKey``).

Keys and values travel as JSON (a ``bytes`` value as ``{"base64": ...}``). Errors: 400 (malformed request,
wrong store type, a key the store's key serde refuses), 404 (unknown store), 405 (wrong method), 503 (the
instance does not run, or the group cannot be described), each with a one-line ``text/plain`` message.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from streamapp.query.requests import QueryError, query_from_dict
from streamapp.query.router import InteractiveQueries, to_json

__all__ = ["QueryRoutes", "Response"]

Response = tuple[int, str, bytes]
"""``(HTTP status, content type, body)``."""


class QueryRoutes:
    """Routes ``/query`` and ``/metadata*`` to ``queries()`` (``None`` until the instance runs: 503)."""

    def __init__(self, queries: Callable[[], InteractiveQueries | None]) -> None:
        self._queries = queries

    def __call__(self, method: str, path: str, query_string: str, body: bytes) -> Response | None:
        """The answer of a query route, or ``None`` for a path that is not one."""
        if path not in ("/query", "/metadata", "/metadata/key"):
            return None
        try:
            return self._route(method, path, urllib.parse.parse_qs(query_string), body)
        except QueryError as exc:
            return exc.status, "text/plain", f"{exc}\n".encode()

    def _route(self, method: str, path: str, params: dict[str, list[str]], body: bytes) -> Response:
        expected = "POST" if path == "/query" else "GET"
        if method != expected:
            raise QueryError(f"{path} takes {expected}", status=405)
        queries = self._queries()
        if queries is None:
            raise QueryError("the instance is not running yet", status=503)
        if path == "/query":
            request = query_from_dict(_json(body, "the request body"))
            local = params.get("local", ["false"])[0].lower() == "true"
            result = queries.query_local(request) if local else queries.query(request)
            return 200, "application/json", to_json(result.to_dict())
        if path == "/metadata":
            return 200, "application/json", to_json([m.to_dict() for m in queries.metadata_for_all_clients()])
        store, key = params.get("store", [""])[0], params.get("key", [""])[0]
        if not store or not key:
            raise QueryError("/metadata/key needs ?store=<name>&key=<JSON key>")
        metadata = queries.query_metadata_for_key(store, _json(key.encode(), "key"))
        return 200, "application/json", to_json(metadata.to_dict())


def _json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise QueryError(f"{what} is not JSON: {exc}") from None
