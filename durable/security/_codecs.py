"""Payload codecs: what a world encrypts its payloads with (``codec=``).

A codec encrypts bytes with associated data (an AEAD) and gives keyed
hashes. ``EncryptionCodec`` is AES-256-GCM through the ``cryptography``
package (the ``crypto`` extra, imported on first use so that the core needs
nothing new); any object with the same methods can take its place (a key held
by a KMS, for example).

A ciphertext of ``EncryptionCodec`` is ``version byte, key id (4 bytes),
nonce (12 bytes), ciphertext and tag``: the key id says which key of the
codec (the first one or one of ``old_keys``) decrypts it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import CodecError, ConfigurationError, KeyMismatchError

KEY_ENV = "LITTLE_KEY"
"""The environment variable ``little`` reads the key from (hex or base64 of 32 bytes)."""
KEY_FILE_ENV = "LITTLE_KEY_FILE"
"""The environment variable naming a file that holds the key (raw 32 bytes, hex or base64)."""
OLD_KEYS_ENV = "LITTLE_OLD_KEYS"
"""Older keys, comma separated, still read (hex or base64 each)."""
OLD_KEYS_FILE_ENV = "LITTLE_OLD_KEYS_FILE"
"""A file of older keys, one a line."""

_VERSION = 1
_NONCE = 12
_KEY_ID_BYTES = 4


@runtime_checkable
class Codec(Protocol):
    """What a world asks of its payload codec.

    Attributes:
        key_id: The id of the key new payloads are encrypted under (printable,
            short; it is stored in the clear so that errors can name it).
    """

    key_id: str

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        """Encrypt ``plaintext`` under the current key, bound to ``associated_data``.

        Args:
            plaintext: The payload.
            associated_data: Where the payload belongs (run id, seq, event type);
                decrypting with other associated data must fail.

        Returns:
            The ciphertext, carrying what ``decrypt`` needs to choose the key.
        """

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        """The plaintext of ``ciphertext``, or an error; never other bytes.

        Args:
            ciphertext: What ``encrypt`` returned.
            associated_data: The associated data it was encrypted with.

        Raises:
            KeyMismatchError: The codec has no key with the ciphertext's key id.
            CodecError: The ciphertext or its associated data is not what was encrypted.
        """

    def digests(self, data: bytes) -> list[str]:
        """Keyed hashes of ``data`` (hex), one per key the codec holds, the current key's first.

        Equal data gives equal digests under a key, so content stays
        addressable; without the key a digest says nothing about the data.
        """


_POOL = 512
"""Nonces drawn from the operating system at once (one call instead of 512)."""
_nonces: list[bytes] = []


def _refill() -> bytes:
    """A random 96-bit nonce, refilling the pool from ``os.urandom`` (emptied in a forked child)."""
    raw = os.urandom(_NONCE * _POOL)
    _nonces.extend([raw[i : i + _NONCE] for i in range(_NONCE, len(raw), _NONCE)])
    return raw[:_NONCE]


if hasattr(os, "register_at_fork"):  # a forked child must never reuse its parent's nonces
    os.register_at_fork(after_in_child=_nonces.clear)


def _aesgcm() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise ConfigurationError(
            "EncryptionCodec needs the cryptography package: pip install 'little-workflow[crypto]'."
        ) from exc
    return AESGCM


def key_id_of(key: bytes) -> str:
    """The public id of a key: 8 hex digits of an HMAC under it (the key cannot be found from it)."""
    return hmac.new(key, b"durable key id", hashlib.sha256).hexdigest()[: 2 * _KEY_ID_BYTES]


class EncryptionCodec:
    """AES-256-GCM with a key the application supplies, and older keys still read.

    New payloads are encrypted under ``key``; payloads written under one of
    ``old_keys`` are still decrypted, so keys can be rotated without
    rewriting a data directory at once (``little rekey`` rewrites it).

    Args:
        key: 32 random bytes (``EncryptionCodec.generate_key()``).
        old_keys: Keys used before ``key``, still accepted for reading.

    Raises:
        ConfigurationError: A key is not 32 bytes, or ``cryptography`` is not installed.

    Example:
        >>> import durable
        >>> codec = durable.EncryptionCodec(durable.EncryptionCodec.generate_key())
        >>> codec.decrypt(codec.encrypt(b"card 4242", b"where"), b"where")
        b'card 4242'
    """

    def __init__(self, key: bytes, old_keys: Sequence[bytes] = ()):
        aesgcm = _aesgcm()
        from cryptography.exceptions import InvalidTag  # installed: ``_aesgcm`` imported its package

        self._invalid_tag: type[Exception] = InvalidTag  # what a failed authentication raises
        keys = [key, *old_keys]
        for k in keys:
            if not isinstance(k, bytes) or len(k) != 32:
                raise ConfigurationError(
                    "an EncryptionCodec key is 32 bytes (AES-256); make one with "
                    "EncryptionCodec.generate_key() and keep it outside the data directory."
                )
        self._ciphers: dict[bytes, Any] = {}
        self._hash_keys: list[bytes] = []
        for k in keys:
            kid = bytes.fromhex(key_id_of(k))
            self._ciphers.setdefault(kid, aesgcm(k))
            self._hash_keys.append(hmac.new(k, b"durable keyed hashes", hashlib.sha256).digest())
        self._kid = bytes.fromhex(key_id_of(key))
        self._current = self._ciphers[self._kid]
        self.key_id = self._kid.hex()
        self._header = bytes([_VERSION]) + self._kid

    @staticmethod
    def generate_key() -> bytes:
        """32 random bytes from the operating system: a new key."""
        return os.urandom(32)

    @property
    def key_ids(self) -> list[str]:
        """The ids of every key this codec reads, the current one first."""
        return list(dict.fromkeys(k.hex() for k in self._ciphers))

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        """Encrypt under the current key (a fresh random nonce each time)."""
        try:
            nonce = _nonces.pop()  # atomic: two threads never get the same nonce
        except IndexError:
            nonce = _refill()
        return self._header + nonce + self._current.encrypt(nonce, plaintext, associated_data)  # type: ignore[no-any-return]

    def encrypter(self, into: type[bytes] | type[bytearray] = bytes) -> Callable[[bytes, bytes], bytes]:
        """``encrypt`` as a function that builds its ciphertext as ``into`` (for a store's hot path).

        The same ciphertext as ``encrypt`` (a fresh random nonce each call), put
        together in one copy and with the key looked up once, not per call.
        """
        header, seal, join = self._header, self._current.encrypt, into().join

        def encrypt(plaintext: bytes, associated_data: bytes) -> bytes:
            try:
                nonce = _nonces.pop()  # atomic: two threads never get the same nonce
            except IndexError:
                nonce = _refill()
            ct: bytes = seal(nonce, plaintext, associated_data)
            return join((header, nonce, ct))  # type: ignore[return-value]  # bytes or a bytearray

        return encrypt

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        """Decrypt with the key the ciphertext names."""
        head = 1 + _KEY_ID_BYTES
        if len(ciphertext) < head + _NONCE + 16 or ciphertext[0] != _VERSION:
            raise CodecError("the payload is not a ciphertext of this codec (truncated or another format).")
        kid = ciphertext[1:head]
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise KeyMismatchError(
                f"the payload was encrypted under key id {kid.hex()}, which this codec does not "
                f"hold (it holds {', '.join(self.key_ids)}). Pass that key as the key or in old_keys.",
                key_id=kid.hex(),
            )
        try:
            plain: bytes = cipher.decrypt(
                ciphertext[head : head + _NONCE], ciphertext[head + _NONCE :], associated_data
            )
            return plain
        except self._invalid_tag:
            raise CodecError(
                f"a payload under key id {kid.hex()} does not authenticate: it was edited, damaged "
                "or moved from the place it was written for."
            ) from None

    def digests(self, data: bytes) -> list[str]:
        """HMAC-SHA256 of ``data`` under a key derived from each key, the current key's first."""
        return [hmac.new(k, data, hashlib.sha256).hexdigest() for k in self._hash_keys]

    def __repr__(self) -> str:
        return f"<durable EncryptionCodec key_id={self.key_id!r}>"


# -- keys from the environment (little) -----------------------------------------------


def parse_key(text: str | bytes, where: str) -> bytes:
    """A 32-byte key from raw bytes, hex or base64 text.

    Raises:
        ConfigurationError: ``text`` holds no 32-byte key.
    """
    if isinstance(text, bytes):
        if len(text) == 32:
            return text
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError:
            text = ""
    t = text.strip()
    for decode in (bytes.fromhex, lambda s: base64.b64decode(s, validate=True)):
        try:
            key = decode(t)
        except (ValueError, binascii.Error):
            continue
        if len(key) == 32:
            return key
    raise ConfigurationError(
        f"{where} holds no 32-byte key: give 64 hex digits or the base64 of 32 bytes "
        "(python -c 'import durable; print(durable.EncryptionCodec.generate_key().hex())')."
    )


def codec_from_env(environ: Mapping[str, str] | None = None) -> EncryptionCodec | None:
    """The codec ``little`` uses: the key from ``LITTLE_KEY`` or ``LITTLE_KEY_FILE``, or ``None``.

    Older keys come from ``LITTLE_OLD_KEYS`` (comma separated) or
    ``LITTLE_OLD_KEYS_FILE`` (one a line). A key is never taken from the
    command line, where other users of the machine could read it.

    Raises:
        ConfigurationError: A variable is set but holds no key, or both forms are set.
    """
    env = os.environ if environ is None else environ
    if env.get(KEY_ENV) and env.get(KEY_FILE_ENV):
        raise ConfigurationError(f"set {KEY_ENV} or {KEY_FILE_ENV}, not both.")
    if env.get(KEY_FILE_ENV):
        key = parse_key(_read_file(env[KEY_FILE_ENV], KEY_FILE_ENV), f"the key file {KEY_FILE_ENV}")
    elif env.get(KEY_ENV):
        key = parse_key(env[KEY_ENV], KEY_ENV)
    else:
        return None
    old: list[bytes] = []
    if env.get(OLD_KEYS_ENV):
        old += [parse_key(p, OLD_KEYS_ENV) for p in env[OLD_KEYS_ENV].split(",") if p.strip()]
    if env.get(OLD_KEYS_FILE_ENV):
        text = _read_file(env[OLD_KEYS_FILE_ENV], OLD_KEYS_FILE_ENV).decode("ascii", "replace")
        old += [parse_key(line, OLD_KEYS_FILE_ENV) for line in text.splitlines() if line.strip()]
    return EncryptionCodec(key, old)


def _read_file(name: str, var: str) -> bytes:
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{var}: cannot read the key file: {exc.strerror}.") from exc
