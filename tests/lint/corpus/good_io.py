"""Good: every file, process and network call lives in a tool."""

import subprocess
from pathlib import Path

import httpx

import durable


@durable.tool(idempotent=True)
async def fetch(url: str) -> str:
    return httpx.get(url).text


@durable.tool
async def save(text: str) -> None:
    Path("out.txt").write_text(text)
    subprocess.run(["true"], check=True)


@durable.workflow
async def run(url: str) -> str:
    text = await fetch(url)
    await save(text)
    return text
