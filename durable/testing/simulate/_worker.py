"""``python -m durable.testing.simulate._worker CONFIG``: a worker process of the simulation's slow mode."""

from durable.testing.simulate._killed import serve_main

if __name__ == "__main__":
    serve_main()
