"""Values of the control store sealed under a world's codec: a run's queued input, a blocked run's error.

A sealed value is ``sealed:<base64>``, bound as associated data to its field
and to what owns it: a queued input to its run id, or, for a debounced start,
to its queue and debounce key (a later start of the burst moves its input
into the first start's record, whose run id the later start did not know);
a blocked run's error message to its run id.
"""

from __future__ import annotations

import base64

from ..errors import CodecError
from ._codecs import Codec

_SEALED = "sealed:"


def input_binding(run_id: str, queue: str | None = None, debounce_key: str | None = None) -> str:
    """What a queued input is bound to: its run id, or the queue and key of a debounced start."""
    if debounce_key is None:
        return run_id
    return f"debounce|{len(queue or '')}:{queue or ''}|{len(debounce_key)}:{debounce_key}"


def _ad(field: str, binding: str) -> bytes:
    return f"control.{field}:{binding}".encode("utf-8", "surrogatepass")


def seal_control(codec: Codec | None, field: str, binding: str, text: str) -> str:
    """``text`` sealed under ``codec`` for ``field`` of the record ``binding`` names (``None``: as it is)."""
    if codec is None:
        return text
    sealed = codec.encrypt(text.encode("utf-8", "surrogatepass"), _ad(field, binding))
    return _SEALED + base64.b64encode(sealed).decode()


def open_control(codec: Codec | None, field: str, binding: str, text: str, what: str) -> str:
    """The plain text of ``seal_control``'s output (a text that was never sealed comes back as it is).

    Raises:
        CodecError: The text is sealed and ``codec`` is ``None``, or it does not decrypt
            in this place (``what`` names it).
    """
    if not text.startswith(_SEALED):
        return text
    if codec is None:
        raise CodecError(f"{what} is encrypted; open the world with its codec.")
    raw = codec.decrypt(base64.b64decode(text[len(_SEALED) :]), _ad(field, binding))
    return raw.decode("utf-8", "surrogatepass")


def seal_control_input(
    codec: Codec | None, run_id: str, text: str, *, queue: str | None = None, debounce_key: str | None = None
) -> str:
    """A run's queued input as the control store keeps it (see ``input_binding``)."""
    return seal_control(codec, "input", input_binding(run_id, queue, debounce_key), text)


def open_control_input(
    codec: Codec | None, run_id: str, text: str, *, queue: str | None = None, debounce_key: str | None = None
) -> str:
    """``seal_control_input``'s output opened.

    Raises:
        CodecError: The input is sealed and ``codec`` is ``None``, or it does not decrypt.
    """
    binding = input_binding(run_id, queue, debounce_key)
    return open_control(codec, "input", binding, text, f"the queued input of run {run_id!r}")
