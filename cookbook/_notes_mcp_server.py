"""A small MCP server over stdio, for the MCP recipe and the integration tests (offline).

``python _notes_mcp_server.py COUNTS_FILE [TOOLS_FILE]`` serves two tools,
``read_note`` and ``save_note``, over stdin/stdout (with ``TOOLS_FILE``, only
the tools it names, one per line, and ``delete_note`` when named: a test
changes what a server offers between a crash and a resume). Each call
appends its tool name to ``COUNTS_FILE`` (fsynced), so a test or recipe can
count the calls that really reached the server, across processes.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

COUNTS = sys.argv[1] if len(sys.argv) > 1 else os.devnull
server = MCPServer("notes")
NOTES = {"oslo": "Pack an umbrella: it rains in Oslo.", "lisbon": "Lisbon is sunny; bring sunglasses."}


def _count(name: str) -> None:
    with open(COUNTS, "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


@server.tool()
def read_note(city: str) -> str:
    """Read the travel note kept for a city."""
    _count("read_note")
    return NOTES.get(city.lower(), f"no note for {city}")


@server.tool()
def save_note(city: str, text: str) -> str:
    """Save a travel note for a city."""
    _count("save_note")
    return f"saved note for {city}: {text}"


def delete_note(city: str) -> str:
    """Delete the travel note kept for a city."""
    _count("delete_note")
    return f"deleted the note for {city}"


if __name__ == "__main__":
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as listed:
            offered = set(listed.read().split())
        for name in ("read_note", "save_note"):
            if name not in offered:
                server.remove_tool(name)
        if "delete_note" in offered:
            server.add_tool(delete_note)
    server.run("stdio")
