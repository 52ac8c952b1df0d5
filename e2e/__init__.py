"""End-to-end harness and scenarios (test infrastructure; product code never imports this package)."""
