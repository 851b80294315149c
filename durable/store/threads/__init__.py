"""Threads: values kept by thread (a conversation's items, a graph's checkpoints), beside a world's log.

``threads_for(log)`` opens the store that lives beside a log: ``threads.db``
next to a ``SqliteLog``'s file, the ``threads`` table of a ``PostgresLog``'s
schema, one ``MemoryThreads`` per ``MemoryLog``; behind an ``EncryptedLog``,
the inner log's store with every value sealed under its codec.
"""
