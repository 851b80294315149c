"""Each agent recipe, killed mid-conversation with SIGKILL and resumed in a new process."""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

AGENT_LOOP = {
    "model-turn-0",
    "get_weather-Oslo",
    "get_weather-Lisbon",
    "model-turn-1",
    "packing_list",
    "model-turn-2",
}
OPENAI = {
    "http-request-turn-0",
    "check_status-billing",
    "check_status-search",
    "http-request-turn-1",
    "open_ticket",
    "http-request-turn-2",
    "http-request-turn-3",
}
ANTHROPIC = {"http-request-turn-0", "weather-Oslo", "weather-Lisbon", "http-request-turn-1"}
PYDANTIC_AI = {"model-turn-0", "find_order", "model-turn-1", "track_parcel", "carrier_eta", "model-turn-2"}
WEATHER = {
    "model-turn-0",
    "get_lat_lng-Bergen",
    "get_lat_lng-Porto",
    "model-turn-1",
    "get_weather-rain",
    "get_weather-sunny",
    "model-turn-2",
}
MCP = {"model-turn-0", "read_note", "model-turn-1", "save_note", "model-turn-2"}
OPENAI_AGENTS = {
    "http-request-turn-0",
    "http-request-turn-1",
    "lookup_order",
    "track_parcel",
    "http-request-turn-3",
    "http-request-turn-4",
    "issue_refund",
    "http-request-turn-5",
}


def run_recipe(recipe: str, data: Path, stop_at: str = "") -> subprocess.Popen[str]:
    args = [sys.executable, str(ROOT / "cookbook" / recipe), "--data-dir", str(data)]
    return subprocess.Popen(
        args + (["--stop-at", stop_at] if stop_at else []),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_at(recipe: str, data: Path, stop_at: str) -> None:
    """Run the recipe until ``stop_at`` is in flight, then SIGKILL the process."""
    proc = run_recipe(recipe, data, stop_at)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=60), "the recipe never reached its stop point"
    line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert line.strip() == f"STOPPED {stop_at}", line + err
    assert proc.returncode == -signal.SIGKILL


def resume(recipe: str, data: Path) -> str:
    proc = run_recipe(recipe, data)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return str(json.loads(out.strip().splitlines()[-1])["answer"])


def calls(data: Path) -> Counter[str]:
    return Counter((data / "calls.log").read_text().split())


def check(recipe: str, data: Path, stop_at: str, every_call: set[str], answer: str) -> None:
    """Killed at ``stop_at`` and resumed: the answer is right and only ``stop_at`` ran twice."""
    kill_at(recipe, data, stop_at)
    assert calls(data)[stop_at] == 1
    assert resume(recipe, data) == answer
    after = calls(data)
    assert set(after) == every_call
    assert {name: n for name, n in after.items() if n != 1} == {stop_at: 2}


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["model-turn-1", "get_weather-Lisbon", "model-turn-2"])
def test_agent_loop_recipe_resumes_without_repeating_calls(tmp_path: Path, stop_at: str) -> None:
    """The hand-written loop, killed mid-conversation, repeats no committed model or tool call."""
    answer = "Pack: passport, umbrella, sunglasses."
    check("agent_loop.py", tmp_path, stop_at, AGENT_LOOP, answer)


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["http-request-turn-1", "open_ticket", "http-request-turn-3"])
def test_openai_recipe_resumes_without_repeating_calls(tmp_path: Path, stop_at: str) -> None:
    """The wrapped openai client, killed mid-conversation, sends no committed request again."""
    pytest.importorskip("openai")
    answer = "Report: search has been returning 503 since 09:12. Billing is healthy. Ticket T-1 is open."
    check("openai_client.py", tmp_path, stop_at, OPENAI, answer)


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["model-turn-1", "track_parcel", "model-turn-2"])
def test_pydantic_ai_recipe_resumes_without_repeating_calls(tmp_path: Path, stop_at: str) -> None:
    """The pydantic-ai Agent, killed mid-conversation, repeats no committed request or tool call."""
    pytest.importorskip("pydantic_ai")
    answer = "Your parcel is at the Oslo depot; expected tomorrow before noon."
    check("pydantic_ai_agent.py", tmp_path, stop_at, PYDANTIC_AI, answer)


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["model-turn-1", "get_weather-sunny", "model-turn-2"])
def test_weather_agent_recipe_resumes_without_repeating_calls(tmp_path: Path, stop_at: str) -> None:
    """pydantic-ai's weather agent made durable, killed mid-run, repeats only the call in flight."""
    pytest.importorskip("pydantic_ai")
    check("weather_agent.py", tmp_path, stop_at, WEATHER, "Bergen: rain, 9 C; Porto: sunny, 24 C")


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["http-request-turn-1", "weather-Lisbon"])
def test_anthropic_recipe_resumes_without_repeating_calls(tmp_path: Path, stop_at: str) -> None:
    """The wrapped anthropic client, killed mid-conversation, sends no committed request again."""
    pytest.importorskip("anthropic")
    check(
        "anthropic_client.py",
        tmp_path,
        stop_at,
        ANTHROPIC,
        "Pack an umbrella for Oslo and sunglasses for Lisbon.",
    )


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["model-turn-1", "model-turn-2"])
def test_mcp_recipe_resumes_without_repeating_calls(tmp_path: Path, stop_at: str) -> None:
    """The MCP agent, killed mid-conversation, sends no committed listing or tool call to the server again."""
    pytest.importorskip("pydantic_ai")
    pytest.importorskip("fastmcp")
    answer = "Pack an umbrella: it rains in Oslo. (saved note for Oslo: umbrella packed)"
    check("mcp_agent.py", tmp_path, stop_at, MCP, answer)


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["issue_refund", "http-request-turn-5"])
def test_openai_agents_recipe_resumes_without_repeating_calls(tmp_path: Path, stop_at: str) -> None:
    """The Agents SDK desk (handoffs, parallel tools), killed mid-run, sends no committed request again."""
    pytest.importorskip("agents")
    answer = "Your parcel TRK-88 is at the Oslo depot, due tomorrow. I refunded the 4.99 shipping (R-1234)."
    check("openai_agents_support.py", tmp_path, stop_at, OPENAI_AGENTS, answer)


@pytest.mark.parametrize(
    ("recipe", "package"),
    [
        ("openai_client.py", "openai"),
        ("anthropic_client.py", "anthropic"),
        ("pydantic_ai_agent.py", "pydantic_ai"),
        ("weather_agent.py", "pydantic_ai"),
        ("mcp_agent.py", "pydantic_ai"),
        ("openai_agents_support.py", "agents"),
    ],
)
def test_recipe_without_its_package_skips_cleanly(tmp_path: Path, recipe: str, package: str) -> None:
    """Without its optional package a recipe says what to install and exits 0."""
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nsys.modules[{package!r}] = None\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cookbook" / recipe)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "little-workflow[agents]" in proc.stdout and "Skipping" in proc.stdout
