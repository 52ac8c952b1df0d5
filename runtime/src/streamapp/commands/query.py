"""``streamapp query STORE``: an interactive query (IQv2, KIP-796) against a running application's HTTP server.

Any instance answers for the whole application (``streamapp.query.router``), so ``--url`` may name any pod, a
``kubectl port-forward`` of the app's Service, or a local ``streamapp run`` (default ``$STREAMAPP_QUERY_URL``, else
``http://127.0.0.1:8080``). The query kind follows from the options (``query_body``):

- ``--key K``: ``KeyQuery``; with ``--time-from``/``--time-to`` a ``WindowKeyQuery``;
- ``--from A --to B`` (either, or neither): ``RangeQuery``; with ``--time-from``/``--time-to`` and no key a
  ``WindowRangeQuery``;
- ``--metadata``: ``KeyQueryMetadata`` of ``--key`` (``queryMetadataForKey``), or every instance's
  ``StreamsMetadata`` without one.

Keys are JSON (``--key '"c1"'``, ``--key 42``); a bare word that is not JSON is taken as a string (``--key c1``).
The answer is printed as JSON; partitions answered by a standby or a restoring task are named on stderr
(``stale``), and failed partitions too. Exit code 1 on an HTTP error (its message printed), else 0.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import click

__all__ = ["query", "query_body", "stale_lines"]

DEFAULT_URL = "http://127.0.0.1:8080"


def query_body(
    store: str,
    key: Any = None,
    lower: Any = None,
    upper: Any = None,
    time_from: int | None = None,
    time_to: int | None = None,
    partitions: list[int] | None = None,
    require_active: bool = False,
    position_bound: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``POST /query`` body the options describe (module docstring). ValueError for a key with bounds."""
    windowed = time_from is not None or time_to is not None
    if key is not None and (lower is not None or upper is not None):
        raise ValueError("--key queries one key; --from/--to query a range: give one or the other")
    body: dict[str, Any] = {"store": store}
    if key is not None and not windowed:
        body.update(type="key", key=key)
    elif windowed:
        body.update(type="window_key" if key is not None else "window_range", key=key)
        body["time_from"] = time_from if time_from is not None else 0
        body["time_to"] = time_to if time_to is not None else 2**63 - 1
    else:
        body.update(type="range", lower=lower, upper=upper)
    if partitions:
        body["partitions"] = partitions
    if require_active:
        body["require_active"] = True
    if position_bound:
        body["position_bound"] = position_bound
    return body


def stale_lines(answer: dict[str, Any]) -> list[str]:
    """One line per partition that a standby or restoring task answered, or that failed (for stderr)."""
    lines = []
    for part in answer.get("partitions", []):
        if part.get("failure"):
            lines.append(f"partition {part['partition']}: {part['failure']}: {part.get('message') or ''}".rstrip())
        elif part.get("stale"):
            lines.append(f"partition {part['partition']}: stale, answered by a {part['source']} task")
    return lines


def _json_arg(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare word: a string key


@click.command()
@click.argument("store")
@click.option(
    "--url",
    default=lambda: os.environ.get("STREAMAPP_QUERY_URL", DEFAULT_URL),
    show_default=DEFAULT_URL,
    help="Any instance's HTTP server (default $STREAMAPP_QUERY_URL).",
)
@click.option("--key", "key_text", help="The key (JSON, or a bare word for a string).")
@click.option("--from", "lower_text", help="Range lower bound (inclusive, JSON).")
@click.option("--to", "upper_text", help="Range upper bound (inclusive, JSON).")
@click.option("--time-from", type=int, help="Window start range from (epoch ms): a window query.")
@click.option("--time-to", type=int, help="Window start range to (epoch ms): a window query.")
@click.option("--partitions", help="Only these partitions, e.g. 0,2.")
@click.option("--require-active", is_flag=True, help="Never a standby's or a restoring task's answer.")
@click.option("--position-bound", help='At least this position: JSON {"topic": {"partition": offset}}.')
@click.option("--metadata", is_flag=True, help="Who holds the key's task (with --key), or every instance.")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for the answer.")
def query(
    store: str,
    url: str,
    key_text: str | None,
    lower_text: str | None,
    upper_text: str | None,
    time_from: int | None,
    time_to: int | None,
    partitions: str | None,
    require_active: bool,
    position_bound: str | None,
    metadata: bool,
    timeout: float,
) -> None:
    """Query STORE of a running application (IQv2; docs/interactive-queries.md)."""
    base = url.rstrip("/")
    if metadata:
        if key_text is None:
            path = "/metadata"
        else:
            params = urllib.parse.urlencode({"store": store, "key": json.dumps(_json_arg(key_text))})
            path = f"/metadata/key?{params}"
        click.echo(json.dumps(_call(urllib.request.Request(base + path), timeout), indent=2))
        return
    try:
        body = query_body(
            store,
            _json_arg(key_text),
            _json_arg(lower_text),
            _json_arg(upper_text),
            time_from,
            time_to,
            [int(p) for p in partitions.split(",")] if partitions else None,
            require_active,
            json.loads(position_bound) if position_bound else None,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    request = urllib.request.Request(
        f"{base}/query", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    answer = _call(request, timeout)
    click.echo(json.dumps(answer, indent=2))
    for line in stale_lines(answer):
        click.echo(line, file=sys.stderr)


def _call(request: urllib.request.Request, timeout: float) -> Any:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        message = exc.read().decode(errors="replace").strip()
        raise click.ClickException(f"HTTP {exc.code} from {request.full_url}: {message}") from None
    except OSError as exc:
        raise click.ClickException(f"cannot reach {request.full_url}: {exc}") from None
