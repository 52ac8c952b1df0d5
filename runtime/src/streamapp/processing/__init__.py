"""Execution: stream threads (worker processes), their task manager, tasks and the commit protocol."""
