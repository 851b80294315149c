"""Security: codecs, keys from the environment, sealed control values, files opened without links.

``EncryptionCodec`` (AES-256-GCM) is the codec that ships. The lowest part of the package: it
imports only ``errors``; the encrypted stores that use it live in ``durable.store.encrypted``.
"""

from __future__ import annotations

from ._codecs import KEY_ENV as KEY_ENV
from ._codecs import KEY_FILE_ENV as KEY_FILE_ENV

# The door: what the other parts of the package use (not public API).
from ._codecs import Codec as Codec
from ._codecs import codec_from_env as codec_from_env
from ._confined import list_folder as list_folder
from ._confined import open_file as open_file
from ._confined import open_folder as open_folder
from ._confined import read_file as read_file
from ._confined import refuse_linked_database as refuse_linked_database
from ._confined import refuse_links as refuse_links
from ._confined import remove_file as remove_file
from ._confined import remove_folder as remove_folder
from ._confined import write_file as write_file
from ._sealed_inputs import input_binding as input_binding
from ._sealed_inputs import open_control as open_control
from ._sealed_inputs import open_control_input as open_control_input
from ._sealed_inputs import seal_control as seal_control
from ._sealed_inputs import seal_control_input as seal_control_input
