"""Good: the environment is read in a tool, or passed in with the input."""

import os

from pydantic import BaseModel

import durable as d


class Deploy(BaseModel):
    name: str
    region: str


@d.tool
async def home() -> str:
    return os.environ["HOME"]


@d.workflow
async def deploy(inp: Deploy) -> str:
    return f"{inp.name} {inp.region} {await home()}"
