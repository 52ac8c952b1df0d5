"""The interactive-queries example (docs/interactive-queries.md)."""
