"""Example StreamApp: enriching orders with reference data (docs/execution.md, "Enriching with reference data")."""
