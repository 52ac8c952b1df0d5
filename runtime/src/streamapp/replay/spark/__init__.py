"""The replay's Spark side: the modules that run inside Spark's Python workers or build Spark plans."""
