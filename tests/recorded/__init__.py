"""Recorded logs under tests/data replayed against today's code, and drift fixtures."""
