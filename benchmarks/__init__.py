"""Benchmarks of durable against the physical floor of SQLite and against peers.

Run ``python -m benchmarks --smoke`` (seconds) or ``python -m benchmarks --full``;
see ``benchmarks/README.md``.
"""
