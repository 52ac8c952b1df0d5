"""Page views per user and minute (docs/quickstart.md)."""
