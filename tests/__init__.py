"""durable's tests, in folders by kind; put a new test where its kind is.

- ``unit/``: pure functions (paths, serde, manifests, the public surface).
- ``engine/``: engine behaviour, each test on both log backends (``worlds`` fixture).
- ``store/``: log backends, locks, WAL checkpoints, the store conformance suite.
- ``crash/``: real subprocesses killed with SIGKILL, torture suites (marked ``slow``).
- ``recorded/``: recorded logs under ``data/`` replayed against today's code, drift fixtures.
- ``cli/``: the ``little`` CLI, its reference page, cookbook recipes and benchmark smoke runs.
- ``memory/`` and ``outer/``: the memory store and outer loops.
- ``helpers/``: code the tests share (codegen, crash points, Hypothesis strategies) and the
  apps child processes run (``helpers/procs``, ``python -m tests.helpers.procs.<name>``).

``drift_app.py`` stays at this level: the recorded logs under ``data/`` name its
functions by their module, ``tests.drift_app``.
"""
