"""One module per measured system; each is imported only inside a worker process.

Every module exposes the operations its system supports, as functions taking
keyword arguments and returning a JSON-safe dict of measured figures:

- ``seq(dir, n, durability, tool)``: ``n`` sequential steps in a new run.
- ``build(dir, n, kill_at, others)``: write a run to resume later (not timed).
- ``resume(dir, n)``: resume the run ``build`` wrote, in this new process.
- ``fanout(dir, n, durability)``: ``n`` parallel branches of one step each.
- ``outside(n)``: a decorated function called outside any run.
"""
