"""The PostgreSQL database every Postgres store shares: its schema, migrations and notifications.

The library creates, recognises and migrates a Postgres world's schema here; ``Notifier``
listens to its changes.
"""

from __future__ import annotations
