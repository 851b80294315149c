"""Apps that crash tests run as child processes (python -m tests.helpers.procs.<name>)."""
