"""langgraph-pg-durable: a durable LangGraph checkpointer on PostgreSQL."""
# ruff: noqa: E402

from .compiled import use_source_when_stale

use_source_when_stale()  # before any module of the core is imported (see compiled.py)

from .aio import AsyncDurablePostgresSaver
from .core.logs import ActionRecord, RunRecord
from .core.safe_serde import DurableSerializer
from .core.steps import StepRecord, TaskRecord
from .core.threads import ThreadRecord
from .effects import aonce, idempotency_key, once
from .errors import (
    ChannelVersionError,
    CheckpointIntegrityError,
    ConfigError,
    DatabaseUnavailableError,
    DeserializationError,
    DistributionError,
    DurableCheckpointError,
    HistoryRewoundError,
    ThreadBusyError,
    ThreadHeldError,
    ThreadTakenError,
    ListIntegrityError,
    ObjectIntegrityError,
    ObjectStoreError,
    SchemaVersionError,
    SerializationError,
    StatementError,
)
from .retry import RetryPolicy
from .saver import DurablePostgresSaver

__all__ = [
    "ActionRecord",
    "AsyncDurablePostgresSaver",
    "ChannelVersionError",
    "CheckpointIntegrityError",
    "ConfigError",
    "DatabaseUnavailableError",
    "DeserializationError",
    "DistributionError",
    "DurableCheckpointError",
    "DurablePostgresSaver",
    "DurableSerializer",
    "HistoryRewoundError",
    "ThreadBusyError",
    "ThreadHeldError",
    "ThreadTakenError",
    "ListIntegrityError",
    "ObjectIntegrityError",
    "ObjectStoreError",
    "RetryPolicy",
    "RunRecord",
    "SchemaVersionError",
    "SerializationError",
    "StatementError",
    "StepRecord",
    "TaskRecord",
    "ThreadRecord",
    "aonce",
    "idempotency_key",
    "once",
]

__version__ = "0.1.0"
