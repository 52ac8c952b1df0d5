"""The app's functions: module-level, so every pod imports them by name (clickstream.logic:<name>)."""


def is_human(user: str, view: dict) -> bool:
    return not view.get("agent", "").lower().endswith("bot")


def normalise(view: dict) -> dict:
    return {**view, "page": view["page"].split("?")[0].rstrip("/").lower() or "/"}


def page(user: str, view: dict) -> str:
    return view["page"]
