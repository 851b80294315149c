"""What the benchmarks ran on: CPU, cores, Python, SQLite, file system, versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _filesystem(path: str) -> str:
    """The type of the file system holding ``path`` (from ``/proc/mounts`` where there is one)."""
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue
            inside = real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")
            if inside and len(parts[1]) >= len(best):
                best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe(data_dir: str) -> dict[str, str]:
    """The machine and software the figures belong to."""
    info = {
        "CPU": _cpu_model(),
        "cores": str(os.cpu_count()),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "SQLite": sqlite3.sqlite_version,
        "file system": _filesystem(data_dir),
    }
    for dist in ("little-workflow", "pydantic", "dbos", "langgraph", "langgraph-checkpoint-sqlite"):
        v = _version(dist)
        if v is not None:
            info[dist] = v
    return info
