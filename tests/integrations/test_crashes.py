"""SIGKILL a real agent process during a model request or a tool call; resume in a new process.

The scripted API runs in this (the test's) process, so it counts every HTTP
request exactly, whichever process sent it; tool bodies count themselves in
``bodies.log``. A kill during a model request happens while the server holds
that request unanswered.
"""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _scripted_api import Reply, Request, ScriptedAPI, ToolCall

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "pack for rain and sun"
TOOLS = {"weather-oslo", "weather-lisbon"}


def trip(request: Request) -> Reply:
    if request.turn == 0:
        calls = [ToolCall(f"w_{c}", "weather", {"city": c}) for c in ("oslo", "lisbon")]
        return Reply(tool_calls=calls)
    return Reply(text=ANSWER)


def spawn(kind: str, data: Path, url: str, stop_at: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.procs.integration_agent", kind, str(data), url, stop_at],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def wait_stopped(proc: subprocess.Popen[str], name: str) -> None:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=60), "the agent never reached its stop point"
    line = proc.stdout.readline()
    assert line.strip() == f"STOPPED {name}", line + (proc.stderr.read() if proc.stderr else "")


def resume(kind: str, data: Path, url: str) -> str:
    proc = spawn(kind, data, url)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return str(json.loads(out.strip().splitlines()[-1])["output"])


def bodies(data: Path) -> Counter[str]:
    log = data / "bodies.log"
    return Counter(log.read_text().split() if log.exists() else [])


def requests(api: ScriptedAPI) -> Counter[str]:
    return Counter(f"{r.route}-turn-{r.turn}" for r in api.requests)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "route"), [("openai", "chat"), ("anthropic", "messages")])
def test_killed_during_a_model_request_only_that_request_is_sent_again(
    tmp_path: Path, kind: str, route: str
) -> None:
    """Killed while turn 1 is in flight: turn 0 and both tools replay; turn 1 is sent once more."""
    with ScriptedAPI(trip) as api:
        api.hold = lambda r: r.turn == 1 and not api.held.is_set()
        proc = spawn(kind, tmp_path, api.url)
        assert api.held.wait(60), proc.stderr.read() if proc.stderr else ""
        kill(proc)
        assert requests(api) == Counter({f"{route}-turn-0": 1, f"{route}-turn-1": 1})
        api.release()
        assert resume(kind, tmp_path, api.url) == ANSWER
        assert requests(api) == Counter({f"{route}-turn-0": 1, f"{route}-turn-1": 2})
    assert bodies(tmp_path) == Counter(dict.fromkeys(TOOLS, 1))


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "route"), [("openai", "chat"), ("anthropic", "messages")])
def test_killed_during_a_tool_call_the_model_is_not_asked_again(
    tmp_path: Path, kind: str, route: str
) -> None:
    """Killed inside one tool of a parallel pair: only that idempotent tool runs again."""
    with ScriptedAPI(trip) as api:
        proc = spawn(kind, tmp_path, api.url, "weather-lisbon")
        wait_stopped(proc, "weather-lisbon")
        kill(proc)
        assert resume(kind, tmp_path, api.url) == ANSWER
        assert requests(api) == Counter({f"{route}-turn-0": 1, f"{route}-turn-1": 1})
    assert bodies(tmp_path) == Counter({"weather-oslo": 1, "weather-lisbon": 2})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stop_at", "again"), [("model-1", {"model-1"}), ("weather-lisbon", {"weather-lisbon"})]
)
def test_pydantic_ai_agent_killed_mid_run_repeats_only_the_call_in_flight(
    tmp_path: Path, stop_at: str, again: set[str]
) -> None:
    """A pydantic-ai agent killed in a model request or a tool call re-runs only that call."""
    proc = spawn("pydantic", tmp_path, "-", stop_at)
    wait_stopped(proc, stop_at)
    kill(proc)
    assert bodies(tmp_path)[stop_at] == 1
    assert resume("pydantic", tmp_path, "-") == "pack for rain and sun"
    after = bodies(tmp_path)
    assert set(after) == {"model-0", "model-1", *TOOLS}
    assert {k: n for k, n in after.items() if n != 1} == dict.fromkeys(again, 2)


@pytest.mark.slow
def test_killed_inside_a_delegate_agent_s_second_request_only_that_request_runs_again(tmp_path: Path) -> None:
    """SIGKILL in a nested agent's second model request: the resume sends only that request again."""
    proc = spawn("delegating", tmp_path, "-", "expert-model-1")
    wait_stopped(proc, "expert-model-1")
    kill(proc)
    assert resume("delegating", tmp_path, "-") == "pack for rain and sun"
    after = bodies(tmp_path)
    assert set(after) == {
        "lead-model-0",
        "ask_expert",
        "expert-model-0",
        *TOOLS,
        "expert-model-1",
        "lead-model-1",
    }
    # the tool body is entered again to reach the cut request; everything it recorded replays
    assert {k: n for k, n in after.items() if n != 1} == {"ask_expert": 2, "expert-model-1": 2}
