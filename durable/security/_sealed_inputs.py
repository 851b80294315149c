"""Run inputs in the control store, sealed under a world's codec with the run id bound."""

from __future__ import annotations

import base64

from ..errors import CodecError
from ._codecs import Codec

_SEALED = "sealed:"


def seal_control_input(codec: Codec | None, run_id: str, text: str) -> str:
    """``seal_input`` under ``codec`` (``None``: the text as it is)."""
    if codec is None:
        return text
    sealed = codec.encrypt(text.encode(), f"control.input:{run_id}".encode())
    return _SEALED + base64.b64encode(sealed).decode()


def open_control_input(codec: Codec | None, run_id: str, text: str) -> str:
    """``open_input`` under ``codec``.

    Raises:
        CodecError: The input is sealed and ``codec`` is ``None``, or it does not decrypt.
    """
    if not text.startswith(_SEALED):
        return text
    if codec is None:
        raise CodecError(f"the queued input of run {run_id!r} is encrypted; open the world with its codec.")
    return codec.decrypt(base64.b64decode(text[len(_SEALED) :]), f"control.input:{run_id}".encode()).decode()
