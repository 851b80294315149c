"""The charts of the performance page, drawn with matplotlib from the JSON figures of one run.

``draw(figures, folder)`` takes the merged figures of ``python -m
benchmarks``, ``python -m benchmarks.runtime`` and ``python -m
benchmarks.postgres`` (``{"scenario | system": [one dict per repeat]}``)
and writes one SVG per chart; a chart whose figures are missing is left
out. ``python -m benchmarks.page`` calls it.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

Figures = dict[str, list[dict[str, Any]]]


def _med(figs: Figures, scenario: str, system: str, key: str) -> float | None:
    runs = figs.get(f"{scenario} | {system}")
    if not runs or key not in runs[0]:
        return None
    return float(statistics.median(r[key] for r in runs))


def _systems(figs: Figures, scenario: str) -> list[str]:
    return [k.split(" | ", 1)[1] for k in figs if k.split(" | ", 1)[0] == scenario]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "durable", "font.size": 9})
    return plt


def _bars(
    path: Path, title: str, unit: str, groups: list[tuple[str, list[tuple[str, float | None]]]], log: bool
) -> bool:
    """Horizontal bars, one block per group; ``False`` (nothing written) when there is nothing to draw."""
    rows = [(g, label, v) for g, items in groups for label, v in items if v is not None and v > 0]
    if not rows:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(rows) + 1.2))
    names = [f"{label}  [{g}]" if g and g not in label else label for g, label, _ in rows]
    values = [v for _, _, v in rows]
    colors = ["#2b6cb0" if label.startswith("durable") else "#a0aec0" for _, label, _ in rows]
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, values, color=colors)
    ax.set_yticks(ys, names)
    if log:
        ax.set_xscale("log")
    for y, v in zip(ys, values, strict=True):
        ax.text(v, y, f" {v:,.0f}" if v >= 100 else f" {v:.3g}", va="center", fontsize=8)
    ax.set_xlabel(unit + (" (log scale)" if log else ""))
    ax.set_title(title)
    if log:  # bars start a decade below the smallest, so that every bar has a length to compare
        ax.set_xlim(left=min(values) / 10, right=max(values) * 8)
    else:
        ax.set_xlim(right=max(values) * 1.25)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return True


def per_step(figs: Figures, folder: Path) -> Path | None:
    groups = []
    for scenario, name in (("a process", "SQLite"), ("a power", "SQLite, fsync"), ("pa", "Postgres")):
        groups.append((name, [(s, _med(figs, scenario, s, "per_us")) for s in _systems(figs, scenario)]))
    path = folder / "perf-per-step.svg"
    ok = _bars(path, "A trivial step, per step (lower is better)", "µs per step", groups, log=True)
    return path if ok else None


def replay(figs: Figures, folder: Path) -> Path | None:
    items: list[tuple[str, float | None]] = []
    for s in _systems(figs, "c replay"):
        total, empty = _med(figs, "c replay", s, "seconds"), _med(figs, "c empty", s, "seconds")
        first = figs[f"c replay | {s}"][0]
        steps = round(first["seconds"] * 1e6 / first["per_us"]) if first.get("per_us") else 0
        if total is not None and empty is not None and steps:
            items.append((s, (total - empty) / steps * 1e6))
    path = folder / "perf-replay.svg"
    title = "Replay of a killed run, per step above an empty resume (lower is better)"
    return path if _bars(path, title, "µs per step", [("", items)], log=True) else None


def dispatch(figs: Figures, folder: Path) -> Path | None:
    groups = []
    for scenario, name in (("h queue", "SQLite"), ("pq", "Postgres")):
        groups.append((name, [(s, _med(figs, scenario, s, "median_ms")) for s in _systems(figs, scenario)]))
    path = folder / "perf-dispatch.svg"
    title = "Queued one-step run, enqueue to result, median (lower is better)"
    return path if _bars(path, title, "ms", groups, log=True) else None


def throughput(figs: Figures, folder: Path) -> Path | None:
    series: dict[str, list[tuple[int, float]]] = {}
    for key in figs:
        scenario, system = key.split(" | ", 1)
        parts = scenario.split()
        if parts[0] not in ("pi", "i") or len(parts) < 2 or not parts[1].isdigit():
            continue
        v = _med(figs, scenario, system, "per_s")
        if v is not None:
            name = f"{system}, I/O-bound (50 ms)" if parts[0] == "pi" else f"{system}, SQLite, one-step"
            series.setdefault(name, []).append((int(parts[1]), v))
    if not series:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, pts in series.items():
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        style = "-o" if name.startswith("durable") else "--s"
        ax.plot(xs, ys, style, label=name)
        if name.startswith("durable (Postgres)"):
            ax.plot(
                xs,
                [ys[0] * x for x in xs],
                ":",
                color="#718096",
                label="durable (Postgres), linear in workers",
            )
    ax.set_xlabel("worker processes")
    ax.set_xticks(sorted({p[0] for pts in series.values() for p in pts}))
    ax.set_yscale("log")
    ax.set_ylabel("runs / s (log scale)")
    ax.set_title("Queue throughput against workers (higher is better)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = folder / "perf-throughput.svg"
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return path


def draw(figs: Figures, folder: Path) -> list[Path]:
    """Every chart the figures allow, as SVG files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    made = [per_step(figs, folder), replay(figs, folder), dispatch(figs, folder), throughput(figs, folder)]
    return [p for p in made if p is not None]
