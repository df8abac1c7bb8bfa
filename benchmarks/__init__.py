"""Benchmarks: our savers against the official PostgresSaver and the InMemorySaver floor.

Run from the repository root (it needs a PostgreSQL exactly as the tests do, and
matplotlib for the chart; it installs nothing):

    python -m benchmarks            # full run, a few minutes on 2 cores
    python -m benchmarks --quick    # CI smoke: every saver completes every workload

Results go to `benchmarks/results/` (or `--out DIR`): `results.md` (also printed),
`results.json` (raw figures) and the charts.
"""
