"""Health, readiness, metrics and status of a StreamApp instance, served over HTTP by the supervisor."""
