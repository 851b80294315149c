"""Log backends, locks, WAL checkpoints and the store conformance suite."""
