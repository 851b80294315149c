"""``python -m benchmarks``: run the harness (see ``benchmarks/README.md``)."""

from benchmarks.run import main

raise SystemExit(main())
