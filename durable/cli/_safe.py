"""Terminal-safe text: what ``little`` prints never drives the terminal.

A run id, path, name or value read from a data directory may hold control
characters (ESC ``[2J`` clears the screen, a carriage return rewrites a line
and so forges a table row, U+202E reverses the text after it). Every such
character is printed escaped, as Python writes it in a string literal.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Any

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


@lru_cache(maxsize=4096)
def _char(c: str) -> str:
    named = _NAMED.get(c)
    if named is not None:
        return named
    if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        n = ord(c)
        return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"
    return c


def escape(text: str) -> str:
    r"""``text`` with every control, format, separator and unassigned character escaped.

    A backslash is doubled only in text that needs escaping anyway, so plain
    paths print as they are.

    Example:
        >>> print(escape("run" + chr(27) + "[2J" + chr(13) + "fake"))
        run\x1b[2J\rfake
    """
    if text.isprintable():
        return text
    return "".join(map(_char, text))


def safe(value: Any) -> Any:
    """``value`` with every string in it (keys included) escaped by ``escape``."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {safe(k): safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe(v) for v in value]
    return value
