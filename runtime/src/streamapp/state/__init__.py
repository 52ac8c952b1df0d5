"""State stores: interfaces, the RocksDB backend, changelogging, checkpoints and restore."""
