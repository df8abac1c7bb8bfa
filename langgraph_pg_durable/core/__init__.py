"""The sans-I/O core: configs and checkpoints in, statement parameters out; fetched rows in,
CheckpointTuples out.

Nothing here opens a connection, imports psycopg or obstore, or holds a lock: the shells
(`aio.py`, `saver.py`) send what `ops.py` builds from these modules and hand the rows
back. `tests/unit/test_core_imports.py` enforces it.
"""
