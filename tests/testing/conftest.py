"""The virtual clock fixture: each test that asks for it runs on its own virtual time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durable._clock import VirtualClock
from durable.testing import virtual_time


@pytest.fixture
def clock() -> Iterator[VirtualClock]:
    """A virtual clock for this test; run the test's code with ``asyncio.run`` inside it."""
    with virtual_time() as c:
        yield c
