"""Queue prefixes: validation and every name derived from a prefix.

The prefix is the one token venturi substitutes into SQL as plain text, so
:func:`validate_prefix` is the injection guard: it runs before any SQL,
engine or Alembic configuration is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from venturi_sa.errors import BadPrefix

PREFIX_PATTERN = re.compile(r"[a-z_][a-z0-9_]*")
PG_IDENTIFIER_MAX = 63
# The longest name derived from a prefix.  PostgreSQL 18 records every NOT NULL
# column as a constraint named ``<table>_<column>_not_null``; the longest is the
# journal's ``recorded_at`` (29 characters after the prefix, so prefixes have at
# most 34).  Up to PostgreSQL 17 the longest was ``<prefix>_journal_outcome_check``
# (22 characters).  A longer prefix would get a truncated, server-chosen name.
LONGEST_SUFFIX = "_journal_recorded_at_not_null"
MAX_PREFIX_LENGTH = PG_IDENTIFIER_MAX - len(LONGEST_SUFFIX)


def validate_prefix(prefix: object) -> str:
    """Return ``prefix`` unchanged if it is a usable queue prefix.

    Raises :class:`~venturi_sa.errors.BadPrefix` (a ``ValueError``) naming
    what is allowed otherwise.  Nothing is written in either case.
    """
    if not isinstance(prefix, str):
        raise BadPrefix(f"queue prefix must be a string, got {type(prefix).__name__}")
    if not PREFIX_PATTERN.fullmatch(prefix):
        raise BadPrefix(
            f"invalid queue prefix {prefix!r}: use lowercase letters, digits and "
            "underscores, starting with a letter or underscore (^[a-z_][a-z0-9_]*$)"
        )
    if len(prefix) > MAX_PREFIX_LENGTH:
        raise BadPrefix(
            f"queue prefix {prefix!r} is {len(prefix)} characters; at most "
            f"{MAX_PREFIX_LENGTH} are allowed so that every derived name "
            f"(the longest is <prefix>{LONGEST_SUFFIX}, PostgreSQL 18's NOT NULL "
            f"constraint) fits PostgreSQL's {PG_IDENTIFIER_MAX}-byte identifier limit"
        )
    return prefix


@dataclass(frozen=True)
class Names:
    """Every database name venturi derives from one validated prefix."""

    prefix: str

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)

    @property
    def jobs(self) -> str:
        return f"{self.prefix}_jobs"

    @property
    def journal(self) -> str:
        return f"{self.prefix}_journal"

    @property
    def schedules(self) -> str:
        """The periodic-job schedules table (migration v4)."""
        return f"{self.prefix}_schedules"

    @property
    def fires(self) -> str:
        """One row per fired (schedule, fire time) (migration v4)."""
        return f"{self.prefix}_fires"

    @property
    def pauses(self) -> str:
        """Paused kinds, one row per pause (runtime control)."""
        return f"{self.prefix}_pauses"

    @property
    def cancels(self) -> str:
        """Durable cancel requests for claimed jobs (runtime control)."""
        return f"{self.prefix}_cancels"

    @property
    def timeouts(self) -> str:
        """Per-job time limits overriding ``Task.timeout`` (migration v6)."""
        return f"{self.prefix}_timeouts"

    @property
    def on_dead(self) -> str:
        """Owed ``on_dead`` calls of jobs that went dead without their task's code (migration v7)."""
        return f"{self.prefix}_on_dead"

    @property
    def traces(self) -> str:
        """The enqueue's trace context of each job that has one (migration v8)."""
        return f"{self.prefix}_traces"

    @property
    def archive(self) -> str:
        """Terminal jobs moved out of the jobs table, partitioned by day (migration v9)."""
        return f"{self.prefix}_archive"

    def archive_partition(self, day: date) -> str:
        """The archive's partition of one UTC day, e.g. ``shop_archive_20261202``."""
        return f"{self.prefix}_archive_{day:%Y%m%d}"

    @property
    def version_table(self) -> str:
        """The per-prefix Alembic version table."""
        return f"{self.prefix}_alembic_version"

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel that wakes this queue's workers."""
        return f"{self.prefix}_jobs"

    def index(self, suffix: str) -> str:
        """An index or constraint name, e.g. ``index("jobs_claim")``."""
        return f"{self.prefix}_{suffix}"
