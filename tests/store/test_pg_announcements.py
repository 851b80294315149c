"""``Announcements``: who a Postgres world's announcement wakes (the listener's memory, no server)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from durable.store.postgres import _notify
from durable.store.postgres._notify import Announcements


class Woken:
    """Subscribers that count their wake-ups, by name."""

    def __init__(self, heard: Announcements):
        self.heard = heard
        self.counts: dict[str, int] = {}

    def add(self, name: str, *about: str) -> Callable[[], None]:
        self.counts[name] = 0

        def on_change() -> None:
            self.counts[name] += 1

        return self.heard.subscribe(on_change, about)

    def after(self, payload: str | None) -> list[str]:
        """The subscribers one announcement of ``payload`` woke (``None``: a reconnect)."""
        before = dict(self.counts)
        self.heard._bump(payload)
        woke = [n for n, c in self.counts.items() if c != before[n]]
        assert all(self.counts[n] - before[n] == 1 for n in woke)  # each at most once
        return sorted(woke)


def test_an_announcement_wakes_the_subscribers_that_name_it() -> None:
    """An exact payload, a prefix and an empty ``about`` each wake for theirs; a reconnect wakes all."""
    w = Woken(Announcements())
    w.add("run a", "run:a", "cancel:a")
    w.add("run b", "run:b")
    w.add("worker", "queue:", "free:")
    w.add("driver", "cancel:")
    w.add("any")
    assert w.after("run:a") == ["any", "run a"]
    assert w.after("cancel:a") == ["any", "driver", "run a"]
    assert w.after("cancel:b") == ["any", "driver"]
    assert w.after("queue:jobs") == ["any", "worker"]
    assert w.after("free:jobs") == ["any", "worker"]
    assert w.after("run:c") == ["any"]
    assert w.after("run:") == ["any"]  # a payload is not a prefix of the run ids it begins
    assert w.after(None) == ["any", "driver", "run a", "run b", "worker"]


def test_a_subscriber_that_names_a_payload_twice_over_is_woken_once() -> None:
    """A payload that matches a subscriber's exact topic and its prefix wakes it once."""
    w = Woken(Announcements())
    w.add("both", "run:a", "run:", "run:a")
    w.add("exact", "run:a")
    assert w.after("run:a") == ["both", "exact"]
    assert w.counts == {"both": 1, "exact": 1}
    assert w.after("run:b") == ["both"]


def test_a_stopped_subscription_wakes_no_more_and_leaves_nothing_behind() -> None:
    """Stopping forgets the subscriber under every name it gave; stopping twice does nothing."""
    heard = Announcements()
    w = Woken(heard)
    stops = [w.add(f"run {i}", f"run:{i}", "cancel:") for i in range(1_000)]
    keep = w.add("kept", "run:7")
    stop_any = w.add("any")
    assert w.after("run:7") == ["any", "kept", "run 7"]
    for stop in stops:
        stop()
    stops[0]()  # again: nothing
    stop_any()
    assert w.after("run:7") == ["kept"]
    assert w.after("cancel:7") == []
    assert w.after(None) == ["kept"]
    keep()
    assert w.after(None) == []
    assert (heard._everyone, heard._all, heard._exact, heard._prefixed) == ({}, {}, {}, {})


def test_a_failing_subscriber_does_not_keep_the_others_from_waking() -> None:
    """A subscriber whose loop is closed raises; the announcement still reaches the rest."""
    heard = Announcements()
    w = Woken(heard)

    def closed() -> None:
        raise RuntimeError("Event loop is closed")

    heard.subscribe(closed, ("run:a",))
    w.add("after it", "run:a")
    assert w.after("run:a") == ["after it"]
    assert heard.count == 1


def test_subscribing_and_stopping_while_announcements_are_heard() -> None:
    """Threads subscribe and stop while the listening thread wakes them: no error, no one lost."""
    heard = Announcements()
    steady = Woken(heard)
    steady.add("steady", "run:x")
    errors: list[BaseException] = []
    go = threading.Event()

    def churn() -> None:
        try:
            go.wait()
            for i in range(2_000):
                stop = heard.subscribe(lambda: None, (f"run:{i % 7}", "run:x", "queue:"))
                stop()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(3)]
    for t in threads:
        t.start()
    go.set()
    for _ in range(2_000):
        heard._bump("run:x")
    for t in threads:
        t.join()
    assert errors == []
    assert steady.counts["steady"] == 2_000
    assert (len(heard._everyone), list(heard._exact), heard._prefixed) == (1, ["run:x"], {})


def test_the_latest_distinct_announcements_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``heard_lately`` keeps the last RECENT distinct payloads; one heard again is the newest."""
    monkeypatch.setattr(_notify, "RECENT", 3)
    heard = Announcements()
    assert heard.last_heard is None
    for p in ("run:a", "run:b", "run:a", "run:c", "run:d"):
        heard._bump(p)
    heard._bump(None)  # a reconnect counts, and is no payload
    assert [p for p in ("run:a", "run:b", "run:c", "run:d") if heard.heard_lately(p)] == [
        "run:a",
        "run:c",
        "run:d",
    ]
    assert heard.last_heard == "run:d" and heard.count == 6
