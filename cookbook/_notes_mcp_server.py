"""A small MCP server over stdio, for the MCP recipe and the integration tests (offline).

``python _notes_mcp_server.py COUNTS_FILE`` serves two tools, ``read_note``
and ``save_note``, over stdin/stdout. Each call appends its tool name to
``COUNTS_FILE`` (fsynced), so a test or recipe can count the calls that
really reached the server, across processes.
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


if __name__ == "__main__":
    server.run("stdio")
