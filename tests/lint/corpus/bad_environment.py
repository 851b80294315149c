"""Bad: workflow bodies read the process's environment."""

import os
import platform
import sys
from os import environ

import durable as d


def region() -> str:
    return os.getenv("REGION", "eu")  # expect: environment


@d.workflow
async def deploy(name: str) -> str:
    home = os.environ["HOME"]  # expect: environment
    mode = environ.get("MODE")  # expect: environment
    host = platform.node()  # expect: environment
    return f"{name} {home} {mode} {host} {region()} {sys.argv}"  # expect: environment
