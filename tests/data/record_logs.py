"""Write the recorded runs under ``tests/data/``: ``python tests/data/record_logs.py``.

Each case runs ``tests/drift_app.py`` (the current code) or a deliberately
changed copy of it (the code a run was started with before a deploy) in its
own process, stops it before its last step as a crash would, and stores
the run's log as ``<case>/events.jsonl`` (one row a line) with the
artifacts it wrote under ``<case>/artifacts/``. The tests load these into
both backends and resume them with the current code.

The output is deterministic: running the script again rewrites the same files.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = HERE.parent / "drift_app.py"
RUN_ID = "run_recorded"
THRESHOLD = 200
"""The artifact threshold of the recording world: the ``table`` step's output goes to an artifact."""

# case -> (old source text, the text the recorded code had instead, models, input)
CASES: dict[str, tuple[str, str, dict[str, str] | None, dict[str, list[str]] | None]] = {
    "clean": ("", "", None, None),
    "signature": (
        "async def score(candidate_id: str, strict: bool = False) -> int:",
        "async def score(candidate_id: str) -> int:",
        None,
        None,
    ),
    "option": ("@durable.tool(idempotent=True)", "@durable.tool(idempotent=False)", None, None),
    "model_slot": ('@durable.model_call(slot="worker")', '@durable.model_call(slot="planner")', None, None),
    "models": ("", "", {"worker": "gpt-4o-mini"}, None),
    "child_workflow": ('@durable.workflow(version="2")', '@durable.workflow(version="1")', None, None),
    "input": ("", "", None, {"candidates": ["ada", "linus"]}),
    "output_schema": ("    table_rows: int\n", "    table_rows: int\n    comment: str = ''\n", None, None),
}
DERIVED = {"tampered_artifact": "clean", "missing_artifact": "clean", "newer_format": "clean"}


def _load_app(old: str, new: str) -> types.ModuleType:
    """Import the app as module ``tests.drift_app``, with ``old`` replaced by ``new`` in its source."""
    source = APP.read_text()
    if old:
        assert old in source, f"{old!r} is not in {APP.name}"
        source = source.replace(old, new)
    module = types.ModuleType("tests.drift_app")
    module.__file__ = str(APP)
    sys.modules["tests.drift_app"] = module
    exec(compile(source, str(APP), "exec"), module.__dict__)
    return module


def _record(case: str, out: Path) -> None:
    """Run one case in this process and write its files to ``out``."""
    import durable

    old, new, models, inp = CASES[case]
    app = _load_app(old, new)
    app.STOP_BEFORE_FINISH["on"] = True
    data_dir = Path(tempfile.mkdtemp())
    world = durable.local_world(data_dir, artifact_threshold=THRESHOLD)
    try:
        asyncio.run(
            durable.run_workflow(
                app.review,
                inp or app.INPUT,
                world=world,
                run_id=RUN_ID,
                models=models or app.MODELS,
            )
        )
    except app.Crash:
        pass
    else:
        raise AssertionError("the recorded run was meant to stop before its last step")
    lines = []
    for info in sorted(world.runs(), key=lambda i: i.run_id):
        for seq, type_, data in world.log.read(info.run_id):
            row = {
                "run_id": info.run_id,
                "workflow": info.workflow,
                "parent_run_id": info.parent_run_id,
                "status": info.status,
                "seq": seq,
                "type": type_,
                "data": json.loads(data),
            }
            # The row's own keys sorted; the payload as written (an output's hash is over its key order).
            lines.append(json.dumps(dict(sorted(row.items())), ensure_ascii=False))
    world.close()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "events.jsonl").write_text("\n".join(lines) + "\n")
    for blob in sorted((data_dir / "artifacts").rglob("*")):
        if blob.is_file() and not blob.name.startswith("."):
            target = out / blob.relative_to(data_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            if blob.suffix == ".json":  # keep manifests stable and small
                target.write_text(json.dumps(json.loads(blob.read_text()), sort_keys=True) + "\n")
            else:
                shutil.copyfile(blob, target)
    shutil.rmtree(data_dir)


def _derive(case: str, base: Path, out: Path) -> None:
    """Damage a copy of a recorded case: a changed payload, a missing one, a newer format."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(base, out)
    rows = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    if case == "newer_format":
        for row in rows:
            if row["type"] == "run.started":
                row["data"]["format_version"] = 99
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (out / "events.jsonl").write_text(text)
        return
    mine = [r for r in rows if r["run_id"] == RUN_ID]
    table = next(r for r in mine if r["type"] == "step.completed" and "artifact" in r["data"])
    key = next(
        r["data"]["key"]
        for r in mine
        if r["type"] == "effect.intent" and r["data"]["name"] == "save_artifact"
    )
    receipt = next(r for r in mine if r["type"] == "effect.receipt" and r["data"]["key"] == key)
    if case == "tampered_artifact":
        sha = receipt["data"]["result"]["sha256"].partition(":")[2]
        blob = out / "artifacts" / sha[:2] / sha
        blob.write_bytes(blob.read_bytes().replace(b"ada", b"eve"))
    else:
        sha = table["data"]["artifact"]["sha256"].partition(":")[2]
        (out / "artifacts" / sha[:2] / sha).unlink()


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--case":
        _record(argv[1], HERE / argv[1])
        return 0
    sys.path.insert(0, str(HERE.parent.parent))
    for case in CASES:
        subprocess.run([sys.executable, __file__, "--case", case], check=True)
        print(f"recorded {case}")
    for case, base in DERIVED.items():
        _derive(case, HERE / base, HERE / case)
        print(f"derived {case} from {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
