"""venturi: a PostgreSQL job queue that joins your SQLAlchemy session."""

from __future__ import annotations

from venturi_sa.errors import (
    BadPrefix,
    DuplicateKind,
    InvalidOption,
    InvalidPayload,
    JobNotFound,
    SchemaNotMigrated,
    UnknownKind,
    VenturiError,
)
from venturi_sa.models import Models, make_models
from venturi_sa.prefix import validate_prefix
from venturi_sa.states import Outcome, Status

__all__ = [
    "BadPrefix",
    "DuplicateKind",
    "InvalidOption",
    "InvalidPayload",
    "JobNotFound",
    "Models",
    "Outcome",
    "SchemaNotMigrated",
    "Status",
    "UnknownKind",
    "VenturiError",
    "make_models",
    "validate_prefix",
]
