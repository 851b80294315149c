"""``little lint``: every rule fires on its bad example and on nothing good, and the cookbook passes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from durable.cli import main
from durable.errors import ConfigurationError
from durable.ops._lint import lint, lint_source
from durable.ops._lint_rules import RULES

CORPUS = Path(__file__).parent / "corpus"
ROOT = Path(__file__).resolve().parents[2]
BAD = sorted(CORPUS.glob("bad_*.py"))
GOOD = sorted(CORPUS.glob("good_*.py"))
_EXPECT = re.compile(r"#\s*expect:\s*([\w-]+)")


def _expected(path: Path) -> set[tuple[int, str]]:
    lines = path.read_text().splitlines()
    return {(n, m.group(1)) for n, line in enumerate(lines, 1) if (m := _EXPECT.search(line))}


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_example_fires_exactly_on_its_marked_lines(path: Path) -> None:
    """Each bad module's findings are exactly the lines marked `# expect: RULE`, with that rule."""
    found = {(f.line, f.rule.name) for f in lint(str(path))}
    assert found == _expected(path)


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_example_has_no_finding(path: Path) -> None:
    """Each good module passes the linter."""
    assert lint(str(path)) == []


def test_every_rule_has_a_bad_example() -> None:
    """The corpus has a bad module that makes every rule but the syntax one fire."""
    fired = {name for path in BAD for _, name in _expected(path)}
    assert fired == {r.name for r in RULES if r.name != "syntax"}


def test_every_rule_has_a_docs_entry_with_bad_and_good_examples() -> None:
    """The rules page has a section per rule code with a bad and a good example."""
    page = (ROOT / "docs" / "reference" / "lint.md").read_text()
    sections = re.split(r"^## ", page, flags=re.M)[1:]
    by_code = {s.split()[0]: s for s in sections}
    for rule in RULES:
        section = by_code[rule.code]
        assert rule.name in section.splitlines()[0]
        assert "Bad:" in section and "Good:" in section


def test_ignore_comment_silences_its_line_only() -> None:
    """`# durable: ignore[...]` silences its rule by code or name; removing the comments brings them back."""
    source = (CORPUS / "silenced.py").read_text()
    assert lint_source(source) == []
    bare = re.sub(r"\s*# durable: ignore\[[^\]]*\]", "", source)
    assert {f.rule.name for f in lint_source(bare)} == {"clock", "environment"}


def test_ignore_of_another_rule_does_not_silence() -> None:
    """An ignore comment naming a different rule leaves the finding in place."""
    source = (
        "import time\nimport durable\n@durable.workflow\nasync def w() -> float:\n"
        "    return time.time()  # durable: ignore[io]\n"
    )
    assert [f.rule.name for f in lint_source(source)] == ["clock"]


def test_local_names_shadowing_stdlib_are_not_flagged() -> None:
    """`random()` imported from durable and a local `open` helper are not mistaken for the stdlib."""
    source = (
        "from durable import random, workflow\n"
        "def open(x: str) -> str:\n    return x\n"
        "@workflow\nasync def w() -> str:\n    return open(str(random()))\n"
    )
    assert lint_source(source) == []


def test_tool_body_and_unreached_function_are_not_checked() -> None:
    """Code in a tool, and a module function no workflow calls, may meet the world."""
    source = (
        "import time\nimport durable\n"
        "def unused() -> float:\n    return time.time()\n"
        "@durable.tool\nasync def t() -> float:\n    return time.time()\n"
        "@durable.workflow\nasync def w() -> float:\n    return await t()\n"
    )
    assert lint_source(source) == []


STEP_READS_THE_CLOCK = """
import time
import durable
{imports}
{helpers}
@durable.step
async def stamp() -> float:
    started = time.time()
{calls}
    return started
@durable.workflow
async def w() -> float:
    return await stamp()
"""


def _step_findings(imports: str = "", helpers: str = "", calls: str = "") -> list[tuple[str, str]]:
    source = STEP_READS_THE_CLOCK.format(imports=imports, helpers=helpers, calls=calls or "    pass")
    return [(f.rule.name, f.message.split(" in ")[1].split(":")[0]) for f in lint_source(source)]


def test_a_step_that_makes_no_durable_call_is_not_checked() -> None:
    """A step's output is recorded: the clock read in a step without durable calls replays with it."""
    assert _step_findings() == []
    assert _step_findings(calls="    durable.current_run()") == []  # reads the run's identity only
    assert _step_findings(imports="import asyncio", calls="    await asyncio.sleep(0)") == []


def test_a_step_that_makes_a_durable_call_is_checked() -> None:
    """The same read in a step that then makes a durable call is reported: a resume runs the body again."""
    assert _step_findings(calls="    await durable.sleep(1)") == [("clock", "step 'stamp'")]
    tool = "@durable.tool\nasync def notify(at: float) -> None: ...\n"
    assert _step_findings(helpers=tool, calls="    await notify(started)") == [("clock", "step 'stamp'")]


def test_a_step_whose_helper_makes_a_durable_call_is_checked() -> None:
    """A durable call made through the module's own undecorated helper counts."""
    helper = "async def pause() -> None:\n    await durable.sleep(1)\n"
    assert _step_findings(helpers=helper, calls="    await pause()") == [("clock", "step 'stamp'")]


@pytest.mark.parametrize("imports", ["from myapp.tools import charge", "from .tools import charge"])
def test_a_step_that_awaits_a_function_of_another_module_is_checked(imports: str) -> None:
    """An awaited function imported from the application may be a tool there: the step is checked."""
    assert _step_findings(imports=imports, calls="    await charge(started)") == [("clock", "step 'stamp'")]


def test_syntax_error_is_a_finding() -> None:
    """A module that does not parse is reported, with its line, as DUR000."""
    [finding] = lint_source("def broken(:\n", "broken.py")
    assert (finding.rule.code, finding.line, finding.path) == ("DUR000", 1, "broken.py")


def test_linting_never_imports_the_module(tmp_path: Path) -> None:
    """A module that would fail (or act) on import is linted without being run."""
    mod = tmp_path / "explodes.py"
    mod.write_text(
        "raise SystemExit('imported!')\nimport durable\n"
        "@durable.workflow\nasync def w() -> None:\n    open('x')\n"
    )
    assert [f.rule.name for f in lint(str(mod))] == ["io"]


def test_module_name_is_found_on_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dotted module name is looked up on sys.path; a package means its whole folder."""
    pkg = tmp_path / "flows"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "daily.py").write_text((CORPUS / "bad_clock.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    expected = len(_expected(CORPUS / "bad_clock.py"))
    assert len(lint("flows.daily")) == expected
    assert len(lint("flows")) == expected


def test_unknown_target_is_a_clear_error() -> None:
    """A target that is no file, directory or module raises ConfigurationError saying what to pass."""
    with pytest.raises(ConfigurationError, match="no file, no directory and no module"):
        lint("no_such_module_here.at_all")


def test_cli_text_format_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    """`little lint` prints path:line:col: CODE [rule] and exits 1 on findings, 0 on none."""
    assert main(["lint", str(CORPUS / "bad_random.py")]) == 1
    out = capsys.readouterr().out
    assert f"{CORPUS / 'bad_random.py'}:18:14: DUR002 [random]" in out
    assert "4 findings in 1 file" in out
    assert main(["lint", str(CORPUS / "good_random.py")]) == 0


def test_cli_github_format(capsys: pytest.CaptureFixture[str]) -> None:
    """`--format github` prints one ::error workflow command per finding with file, line and title."""
    assert main(["lint", "--format", "github", str(CORPUS / "bad_not_awaited.py")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        f"::error file={CORPUS / 'bad_not_awaited.py'},line=14,col=5,title=DUR005 not-awaited::"
    )


def test_cli_unknown_target_exits_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad target prints one line to stderr and exits 1, without a data directory."""
    assert main(["lint", "nowhere/at/all.py"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("little: nothing to lint at") and err.count("\n") == 1


def test_cookbook_passes_the_linter() -> None:
    """Every cookbook recipe passes `little lint` (run as a separate process, as a user would)."""
    proc = subprocess.run(
        [sys.executable, "-m", "durable.cli", "lint", str(ROOT / "cookbook")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("0 findings in ")
