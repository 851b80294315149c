"""A burst of debounced starts of ``unhappy_app.digest`` from a process of its own (a web server's stand-in).

Usage:
    python -m tests.helpers.procs.debounce_burst SECONDS EVERY DEBOUNCE DEBOUNCE_MAX
        starts ``digest`` (key ``digest``) every EVERY seconds for SECONDS seconds,
        then prints one JSON line: the time of its first start and the run id of each start.
"""

from __future__ import annotations

import json
import sys
import time

import durable
from tests.helpers.procs.unhappy_app import digest, open_world, unhappy


def burst(seconds: float, every: float, debounce: float, debounce_max: float) -> None:
    world = open_world()
    try:
        first = time.time()
        ids = []
        while time.time() - first < seconds:
            h = durable.start_workflow(
                digest,
                f"batch at {time.time() - first:.2f}",
                world=world,
                queue=unhappy,
                debounce_key="digest",
                debounce=debounce,
                debounce_max=debounce_max,
            )
            ids.append(h.run_id)
            time.sleep(every)
        print(json.dumps({"first": first, "ids": ids}), flush=True)
    finally:
        world.close()


if __name__ == "__main__":
    burst(*(float(a) for a in sys.argv[1:5]))
