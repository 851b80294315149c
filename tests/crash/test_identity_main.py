"""Workflow identity does not depend on how the module was started (``python app.py`` or ``import app``).

``tests/data/main_script`` was recorded by the previous release, which named
the functions of a module run as a script ``__main__.*``: ``app.py`` (a copy
of ``tests/helpers/procs/shop_app.py``) was run with ``APP_KILL=charge`` and SIGKILLed
inside ``charge``, after ``reserve`` and the child workflow ``receipt``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

import durable
from durable import CapabilityDriftError
from durable.engine._drift import run_drift
from durable.engine._recorded import Recorded
from durable.engine._spec import spec_of
from tests.conftest import Worlds
from tests.helpers.procs import shop_app
from tests.helpers.recorded import load

ROOT = Path(__file__).resolve().parents[2]
RESUME = """\
import asyncio, json, sys
import durable
import app

world = durable.local_world(sys.argv[1])
print(json.dumps(asyncio.run(durable.run_workflow(app.checkout, "sku-1", world=world, run_id="r"))))
"""
EXPECTED = {"total": 500, "receipt": "receipt for 5 items"}


def _app_dir(tmp_path: Path) -> Path:
    app = tmp_path / "shop"
    app.mkdir()
    shutil.copyfile(ROOT / "tests" / "helpers" / "procs" / "shop_app.py", app / "app.py")
    (app / "resume.py").write_text(RESUME)
    return app


def _python(app: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Only the installed durable and the app's own folder on the path: a real deployment.
    full = {"PATH": "/usr/bin:/bin", "APP_MARKS": str(app / "marks.log"), **env}
    if "PYTHONPATH" in os.environ:  # the durable under test, when it is not the installed one
        full["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, *args], cwd=app, env=full, capture_output=True, text=True, timeout=120
    )


def _marks(app: Path) -> Counter[str]:
    path = app / "marks.log"
    return Counter(path.read_text().split() if path.exists() else [])


def test_a_script_run_killed_is_resumed_by_a_program_importing_the_module(tmp_path: Path) -> None:
    """A ``python app.py`` run SIGKILLed mid-run is finished by ``import app``; no committed body reruns."""
    app = _app_dir(tmp_path)
    data = str(tmp_path / "data")
    killed = _python(app, "app.py", data, env={"APP_KILL": "charge"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with durable.local_world(data) as world:
        [started] = [json.loads(d) for _, t, d in world.log.read("r") if t == "run.started"]
    assert started["manifest"]["workflow"]["qualname"] == "app.checkout"
    assert started["manifest"]["steps"]["charge"]["qualname"] == "app.charge"
    resumed = _python(app, "resume.py", data, env={})
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == EXPECTED
    assert _marks(app) == {"reserve": 1, "receipt": 1, "charge": 2}


def test_little_verify_checks_a_script_run_against_the_imported_module(tmp_path: Path) -> None:
    """``little verify --workflow app:checkout`` finds no drift in a run started with ``python app.py``."""
    app = _app_dir(tmp_path)
    data = str(tmp_path / "data")
    assert _python(app, "app.py", data, env={"APP_KILL": "charge"}).returncode == -signal.SIGKILL
    little = str(Path(sys.executable).with_name("little"))
    verify = subprocess.run(
        [little, "verify", "r", "--data-dir", data, "--workflow", "app:checkout"],
        cwd=app,
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "drift not checked" not in verify.stdout


def test_python_dash_m_and_a_script_name_the_module_the_same(tmp_path: Path) -> None:
    """``python -m app`` and ``python app.py`` record the same identity as an import does."""
    app = _app_dir(tmp_path)
    probe = "import durable, app; print(durable.engine._spec.spec_of(app.checkout).qualname)"
    (app / "probe.py").write_text(
        "import sys, durable\n"
        "from durable.engine._spec import spec_of\n"
        "import __main__\n"
        "@durable.workflow\n"
        "async def checkout(sku: str) -> str:\n"
        "    return sku\n"
        "print(spec_of(checkout).qualname)\n"
    )
    assert _python(app, "probe.py", env={}).stdout.strip() == "probe.checkout"
    assert _python(app, "-m", "probe", env={}).stdout.strip() == "probe.checkout"
    assert _python(app, "-c", probe, env={}).stdout.strip() == "app.checkout"


def test_a_module_outside_any_import_root_keeps_its_main_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function with no importable module (``python -c``, a REPL) is still named ``__main__``."""
    from durable.engine._module_name import module_name

    def f() -> None: ...

    # The main module of ``python -c`` or of a REPL: no spec, no file.
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    f.__module__ = "__main__"
    f.__code__ = f.__code__.replace(co_filename="<stdin>")
    assert module_name(f) == "__main__"


def test_an_old_log_recorded_as_main_resumes_from_the_imported_module(worlds: Worlds) -> None:
    """A log naming the workflow, its steps and its child ``__main__.*`` resumes under the module's name."""
    world = load(worlds, "main_script")
    out = asyncio.run(durable.run_workflow(shop_app.checkout, "sku-1", world=world, run_id="r"))
    assert out == EXPECTED


def test_an_old_main_log_still_reports_a_real_signature_change(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepting the old ``__main__`` names does not hide drift: a changed child signature is reported."""
    world = load(worlds, "main_script")
    spec = spec_of(shop_app.checkout)
    assert spec is not None
    rec = Recorded.from_rows(world.log.read("r"), "r")
    started = rec.started
    assert started is not None
    assert run_drift(started, spec, {}, rec) == []
    receipt = spec_of(shop_app.receipt)
    assert receipt is not None
    monkeypatch.setattr(receipt, "version", "2")
    changes = run_drift(started, spec, {}, rec)
    assert [c.key for c in changes] == ["workflows.receipt.definition_hash"]
    with pytest.raises(CapabilityDriftError):
        asyncio.run(durable.run_workflow(shop_app.checkout, "sku-1", world=world, run_id="r"))
