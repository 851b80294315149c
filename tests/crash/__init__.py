"""Real subprocesses killed with SIGKILL, and the torture suites."""
