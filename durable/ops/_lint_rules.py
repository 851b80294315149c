"""The rules of ``little lint``: what each one looks for and what it says.

Each rule has a code, a short name (either silences a line with
``# durable: ignore[CODE]`` or ``# durable: ignore[name]``) and a fix the
message gives. The tables below are matched against a call's dotted name as
the importing module spells it out (``from time import time`` makes ``time()``
``time.time``). The rules page, ``docs/reference/lint.md``, has a bad and a
good example of each.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One check: its code, short name, and the advice every finding of it gives."""

    code: str
    name: str
    advice: str


CLOCK = Rule(
    "DUR001",
    "clock",
    "a replay reads another time; use durable.now() or durable.sleep(), or move it into a @tool",
)
RANDOM = Rule(
    "DUR002",
    "random",
    "a replay draws another value; use durable.random() or durable.uuid4(), or move it into a @tool",
)
ENVIRONMENT = Rule(
    "DUR003",
    "environment",
    "another machine or process reads another value; pass it in the workflow's input or read it in a @tool",
)
IO = Rule(
    "DUR004",
    "io",
    "a replay repeats it and may see another answer; move it into a @tool or @model_call",
)
NOT_AWAITED = Rule(
    "DUR005",
    "not-awaited",
    "the call never runs and nothing is recorded; put `await` before it",
)
STEP_IN_LOOP = Rule(
    "DUR006",
    "step-in-loop",
    "the second visit raises MaxVisitsExceededError; give the step max_visits=N or key each "
    "call with `async with durable.branch(key)`",
)
AWAITED_INTERRUPT = Rule(
    "DUR007",
    "awaited-interrupt",
    "durable.interrupt() returns the answer, not a coroutine: the run waits, then the resume that "
    "answers it fails; remove the await",
)
SYNTAX = Rule("DUR000", "syntax", "fix the syntax error; the file was not checked")

RULES = (SYNTAX, CLOCK, RANDOM, ENVIRONMENT, IO, NOT_AWAITED, STEP_IN_LOOP, AWAITED_INTERRUPT)

CLOCK_CALLS = frozenset(
    {
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.process_time",
        "time.localtime",
        "time.gmtime",
        "time.ctime",
        "time.sleep",
        "asyncio.sleep",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
    }
)
RANDOM_CALLS = frozenset({"uuid.uuid1", "uuid.uuid4", "os.urandom", "os.getrandom"})
RANDOM_PREFIXES = ("random.", "secrets.", "numpy.random.")
ENVIRONMENT_CALLS = frozenset(
    {"os.getenv", "os.getcwd", "os.getpid", "os.getlogin", "socket.gethostname", "getpass.getuser"}
)
ENVIRONMENT_NAMES = frozenset({"os.environ", "sys.argv"})
"""Names that read the environment without being called (``os.environ["X"]``)."""
ENVIRONMENT_PREFIXES = ("platform.",)
IO_CALLS = frozenset(
    {
        "open",
        "input",
        "io.open",
        "os.system",
        "os.popen",
        "os.remove",
        "os.unlink",
        "os.rename",
        "os.replace",
        "os.mkdir",
        "os.makedirs",
        "os.listdir",
        "os.scandir",
        "os.walk",
        "sqlite3.connect",
    }
)
IO_PREFIXES = (
    "subprocess.",
    "socket.",
    "shutil.",
    "requests.",
    "httpx.",
    "aiohttp.",
    "urllib.request.",
    "http.client.",
    "asyncio.create_subprocess_",
    "asyncio.open_connection",
)
IO_METHODS = frozenset(
    {"read_text", "write_text", "read_bytes", "write_bytes", "unlink", "iterdir", "touch", "rmdir"}
)
"""Method names of ``pathlib.Path`` that touch the disk, whatever the receiver is called."""
DURABLE_ASYNC = frozenset(
    {"sleep", "recv", "send", "parallel", "save_artifact", "write_stream", "run_workflow", "get_event"}
)
"""Coroutine functions of ``durable`` that do nothing unless awaited."""


def classify(dotted: str) -> Rule | None:
    """The rule a call of ``dotted`` (a fully spelled name) breaks in a workflow body, if any."""
    if dotted in CLOCK_CALLS:
        return CLOCK
    if dotted in RANDOM_CALLS or dotted.startswith(RANDOM_PREFIXES):
        return RANDOM
    if dotted in ENVIRONMENT_CALLS or dotted in ENVIRONMENT_NAMES or dotted.startswith(ENVIRONMENT_PREFIXES):
        return ENVIRONMENT
    if dotted in IO_CALLS or dotted.startswith(IO_PREFIXES):
        return IO
    return None
