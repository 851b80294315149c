"""A failing simulation printed as a pytest test a developer can paste into ``tests/``.

The test holds the program's code (``_source``), the schedule of actions
that broke it, and one call that plays them again and asserts that no
invariant broke; its docstring says what broke. It fails until the bug is
fixed, on the backend the simulation ran on.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from ._faults import Action
from ._program import Program
from ._setup import RUN, Outcome
from ._source import source


def _header(code: str) -> str:
    """The test module's imports: what the code and the test use, nothing more."""
    names = ["Code", "Expect", "Ledger", "Setup", "simulate_one"]
    if "SimulatedFailure" in code:
        names.insert(4, "SimulatedFailure")
    return (
        "from __future__ import annotations\n\nfrom typing import Any\n\nimport durable\n"
        f"from durable.testing.simulate import {', '.join(names)}\n"
    )


def _py(value: Any) -> str:
    """A JSON value as a Python literal, written as the formatter writes it (double quotes)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _schedule(schedule: list[Action]) -> str:
    return "[\n" + "".join(f"    {_py(action)},\n" for action in schedule) + "]"


def printed_test(
    program: Program, outcome: Outcome, *, seed: int | None = None, name: str | None = None
) -> str:
    """The text of a self-contained pytest module that replays ``outcome`` and fails while its bug lives.

    Args:
        program: The (shrunk) program.
        outcome: Its failing outcome (its schedule is played).
        seed: The seed it was found with, named in the docstring.
        name: The test function's name (default ``test_simulated_seed_<seed>``).
    """
    found = outcome.violations[0] if outcome.violations else "(no violation)"
    where = f"seed {seed}, " if seed is not None else ""
    title = f"A run durable's simulator broke ({where}{outcome.backend} backend), shrunk."
    what = textwrap.fill(found, 96, initial_indent="    ", subsequent_indent="    ")
    expect = outcome.setup.expect
    code = source(program)
    test_name = name or f"test_simulated_seed_{seed if seed is not None else 'found'}"
    lines = [
        f'"""{title}',
        "",
        "What broke:",
        "",
        what,
        '"""',
        "",
        _header(code).rstrip(),
        code.rstrip(),
        "",
        "",
        f"SCHEDULE = {_schedule(outcome.schedule)}",
        "",
        "",
        f"def {test_name}() -> None:",
        f'    """The schedule the simulator found breaks no invariant ({outcome.signature})."""',
        "    setup = Setup(",
        "        code,",
        f'        input={{"run": "{RUN}"}},',
        f"        expect=Expect(budget={expect.budget}, calls_changed={expect.calls_changed}, "
        f"in_flight={expect.in_flight}),",
        f"        deadline={outcome.setup.deadline},",
        f"        topics={outcome.setup.topics!r},",
        "    )",
        f'    outcome = simulate_one(setup, backend="{outcome.backend}", schedule=SCHEDULE)',
        "    assert outcome.violations == [], outcome.violations",
    ]
    return "\n".join(lines) + "\n"
