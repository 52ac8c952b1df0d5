"""The one error type of an invalid topology description."""

from __future__ import annotations

from collections.abc import Sequence


class TopologyError(ValueError):
    """A topology description is invalid or cannot be resolved.

    The message names the node, store or topic and the problem, e.g.
    ``node 'count': input 'x' does not exist``, so it can be shown as is to a user (CLI output, a
    StreamApp's ``Degraded`` condition). ``problems`` holds one line per problem when a check reports several
    at once (``problems_error``), else the message alone.
    """

    def __init__(self, message: str, problems: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) if problems is not None else (message,)


def problems_error(problems: Sequence[str], headline: str, advice: str = "") -> TopologyError:
    """One TopologyError for every problem a check found, so a user fixes them all in one round.

    One problem: ``"<problem>. <advice>"``. Several: ``"<n> <headline>:"``, then one indented ``- <problem>``
    line each, then ``advice`` on its own line. ``problems`` must not be empty (ValueError).
    """
    if not problems:
        raise ValueError("problems_error needs at least one problem")
    if len(problems) == 1:
        message = f"{problems[0]}. {advice}" if advice else problems[0]
    else:
        lines = [f"{len(problems)} {headline}:", *(f"  - {problem}" for problem in problems)]
        message = "\n".join(lines + ([advice] if advice else []))
    return TopologyError(message, problems)
