"""Control records held in this process: the memory double of ``RunControl`` (``memory_world``)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection, Iterable, Sequence

from ._protocol import (
    ACTIVE,
    ControlRecord,
    QueueLimits,
    WorkerRecord,
    _partition_free,
    _room,
    adopted,
    announcing,
    claimed_by,
    debounced,
    kinds_of,
    reopened,
    waiting_for_code,
)


class MemoryControl:
    """Control records held in this process (``memory_world``)."""

    def __init__(self) -> None:
        self._records: dict[str, ControlRecord] = {}
        self._workers: dict[str, WorkerRecord] = {}
        self._mutex = threading.Lock()
        self._seq = 0
        self._version = 0
        self._listeners: list[tuple[Callable[[], None], frozenset[int] | None]] = []

    def _put(self, rec: ControlRecord) -> ControlRecord:
        self._records[rec.run_id] = rec
        self._version += 1
        return rec

    def _announce(self, kinds: str) -> None:
        heard = kinds.encode("ascii")
        for on_change, wanted in list(self._listeners):
            if wanted is None or not wanted.isdisjoint(heard):
                on_change()

    def subscribe(
        self, on_change: Callable[[], None], about: Collection[str] = ()
    ) -> Callable[[], None] | None:
        listener = (on_change, kinds_of(about))
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def submit(self, record: ControlRecord) -> ControlRecord:
        out = self._submit(record)
        if record.queue is not None:  # a run without a queue is this process's: no worker claims it
            self._announce("q")
        return out

    def _submit(self, record: ControlRecord) -> ControlRecord:
        with self._mutex:
            old = self._records.get(record.run_id)
            if old is not None:
                return old
            if record.dedup_id is not None:
                for r in self._records.values():
                    if r.queue == record.queue and r.dedup_id == record.dedup_id and r.state in ACTIVE:
                        return r
            if record.debounce_key is not None:
                for r in self._records.values():
                    if (
                        r.queue == record.queue
                        and r.debounce_key == record.debounce_key
                        and r.state == "enqueued"
                    ):
                        return self._put(debounced(r, record))
            self._seq += 1
            return self._put(dataclasses.replace(record, seq=self._seq))

    def get(self, run_id: str) -> ControlRecord | None:
        return self._records.get(run_id)

    def claim(
        self,
        limits: QueueLimits,
        *,
        owner: str,
        pid: int,
        host: str,
        room: int,
        now: float,
        workflows: Collection[str] | None = None,
    ) -> list[ControlRecord]:
        with self._mutex:
            rows = [r for r in self._records.values() if r.queue == limits.name]
            inflight = [r for r in rows if r.state == "claimed"]
            room = _room(limits, room, len(inflight), [r.claimed_at for r in rows], now)
            parts: dict[str | None, int] = {}
            for r in inflight:
                parts[r.partition_key] = parts.get(r.partition_key, 0) + 1
            waiting = sorted(
                (
                    r
                    for r in rows
                    if r.state == "enqueued"
                    and (workflows is None or r.workflow in workflows)
                    and (r.start_at is None or r.start_at <= now)
                ),
                key=lambda r: (r.priority, r.seq),
            )
            out: list[ControlRecord] = []
            for r in waiting:
                if len(out) >= room:
                    break
                if not _partition_free(limits, parts, r.partition_key):
                    continue
                parts[r.partition_key] = parts.get(r.partition_key, 0) + 1
                out.append(self._put(claimed_by(r, owner, pid, host, now)))
            return out

    def adopt(
        self, run_id: str, workflow: str, *, owner: str, pid: int, host: str, now: float
    ) -> ControlRecord:
        with self._mutex:
            old = self._records.get(run_id)
            if old is None:
                self._seq += 1
                old = ControlRecord(run_id, workflow, created_at=now, seq=self._seq)
            return self._put(adopted(old, workflow, owner, pid, host, now))

    def finish(self, run_id: str, state: str) -> None:
        self.finish_many([(run_id, state)])

    @announcing("rf")
    def finish_many(self, ends: Sequence[tuple[str, str]]) -> None:
        with self._mutex:
            for run_id, state in ends:
                old = self._records.get(run_id)
                if old is not None:
                    self._put(
                        dataclasses.replace(
                            old, state=state, cancel_reason=None, resume=None, drives=0, blocked=None
                        )
                    )

    @announcing("rf")
    def block(self, run_id: str, blocked: str) -> None:
        with self._mutex:
            old = self._records.get(run_id)
            if old is not None:
                self._put(dataclasses.replace(old, state="blocked", blocked=blocked))

    @announcing("rf")
    def wait_for_code(self, run_id: str, waiting: str) -> None:
        with self._mutex:
            old = self._records.get(run_id)
            if old is not None:
                self._put(waiting_for_code(old, waiting))

    def uncount(self, run_id: str) -> None:
        with self._mutex:
            old = self._records.get(run_id)
            if old is not None:
                self._put(dataclasses.replace(old, drives=max(old.drives - 1, 0)))

    def delete(self, run_ids: Sequence[str]) -> None:
        with self._mutex:
            for run_id in run_ids:
                if self._records.pop(run_id, None) is not None:
                    self._version += 1

    @announcing("cr")
    def request_cancel(self, run_id: str, reason: str, now: float) -> ControlRecord:
        with self._mutex:
            old = self._records.get(run_id)
            if old is None:
                self._seq += 1
                old = ControlRecord(run_id, "", state="claimed", created_at=now, seq=self._seq)
            if old.state == "enqueued":
                return self._put(dataclasses.replace(old, state="cancelled", cancel_reason=reason))
            if old.state in ("done", "cancelled"):
                return old
            return self._put(dataclasses.replace(old, cancel_reason=reason))

    def cancel_requests(self, run_ids: Iterable[str]) -> dict[str, str]:
        out = {}
        for rid in run_ids:
            r = self._records.get(rid)
            if r is not None and r.cancel_reason is not None and r.state == "claimed":
                out[rid] = r.cancel_reason
        return out

    @announcing("qr")
    def reopen(self, run_id: str, resume: str | None) -> ControlRecord | None:
        with self._mutex:
            old = self._records.get(run_id)
            if old is None:
                return None
            state = "enqueued" if old.queue is not None else "claimed"
            return self._put(reopened(old, state, resume))

    def claimed(self) -> list[ControlRecord]:
        return [r for r in self._records.values() if r.state == "claimed"]

    def blocked_records(self) -> list[ControlRecord]:
        return [r for r in self._records.values() if r.state == "blocked"]

    def waiting_records(self) -> list[ControlRecord]:
        return [r for r in self._records.values() if r.state == "waiting"]

    def records(self, run_ids: Sequence[str]) -> dict[str, ControlRecord]:
        return {rid: self._records[rid] for rid in run_ids if rid in self._records}

    def unstarted(self) -> list[ControlRecord]:
        rows = [
            r for r in self._records.values() if r.claimed_at is None and r.state in ("enqueued", "cancelled")
        ]
        return sorted(rows, key=lambda r: r.seq)

    def version(self) -> int:
        return self._version

    def close(self) -> None:
        pass

    def register_worker(self, worker: WorkerRecord) -> None:
        with self._mutex:
            self._workers[worker.name] = worker

    def unregister_worker(self, name: str) -> None:
        with self._mutex:
            self._workers.pop(name, None)

    def workers(self) -> list[WorkerRecord]:
        with self._mutex:
            return [self._workers[n] for n in sorted(self._workers)]
