"""Bad: files, processes and the network touched from workflow and step bodies."""

import subprocess
from pathlib import Path

import httpx

import durable


@durable.step
async def fetch(url: str) -> str:
    text = httpx.get(url).text  # expect: io
    await durable.sleep(1)  # a durable call: a resume runs the body again, and may see another text
    return text


class Pipeline:
    def save(self, text: str) -> None:
        Path("out.txt").write_text(text)  # expect: io

    @durable.workflow
    async def run(self, url: str) -> str:
        with open("notes.txt") as f:  # expect: io
            notes = f.read()
        subprocess.run(["true"], check=True)  # expect: io
        self.save(notes)
        return await fetch(url)
