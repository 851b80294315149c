"""Type behaviour of the artifact API, checked by ``mypy --strict tests/typing``."""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

import durable


async def save_and_read(world: durable.World) -> None:
    ref = await durable.save_artifact("report.md", b"# hi", "text/markdown", world=world)
    assert_type(ref, durable.ArtifactRef)
    assert_type(ref.read(), bytes)
    assert_type(ref.sha256, str)
    assert_type(ref.path, Path | None)
