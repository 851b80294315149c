"""Encrypted stores: every payload of a log and the stores beside it under a world's codec.

``EncryptedLog``, ``EncryptedArtifacts`` and the encrypted message, outbox and schedule stores.
"""

from __future__ import annotations
