"""The session manifest's stand-ins for what a framework describes in data: made once, within a bound."""

from __future__ import annotations

import pytest

from durable.integrations import _manifest


def test_one_description_is_made_once_and_another_anew() -> None:
    """The same name and value give the same stand-in; a changed value gives another one."""
    first = _manifest.described_value("agent__triage__instructions", {"sha256": "aa"})
    assert _manifest.described_value("agent__triage__instructions", {"sha256": "aa"}) is first
    assert _manifest.described_value("agent__triage__instructions", {"sha256": "bb"}) is not first


def test_the_memo_of_stand_ins_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose descriptions keep changing keeps at most the bound, and still describes each."""
    monkeypatch.setattr(_manifest, "_MOST_STAND_INS", 8)
    monkeypatch.setattr(_manifest, "_STAND_INS", {})
    made = [_manifest.described_value("agent__a__settings", {"n": n}) for n in range(20)]
    assert len(_manifest._STAND_INS) <= 8
    assert len({id(m) for m in made}) == 20
