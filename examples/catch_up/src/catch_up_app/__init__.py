"""Example StreamApp: an hourly count after a repartition, caught up from a backlog (docs/execution.md,
"Catch-up after a repartition")."""
