"""The exceptions venturi raises.  Every one says what went wrong and what to do."""

from __future__ import annotations

from datetime import datetime


class VenturiError(Exception):
    """Root of every error venturi raises on purpose."""


class BadPrefix(VenturiError, ValueError):
    """A queue prefix that is not a short lowercase SQL identifier."""


class UnknownKind(VenturiError, LookupError):
    """A task kind that is not in the queue's registry."""


class DuplicateKind(VenturiError, ValueError):
    """Two task types registered under one kind."""


class InvalidPayload(VenturiError, ValueError):
    """A payload, carry or attachment that fails its schema or is not JSON.

    ``fields`` maps each offending field name to its messages.
    """

    def __init__(self, message: str, fields: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.fields = fields or {}


class InvalidOption(VenturiError, ValueError):
    """An enqueue or worker option out of range (priority, delay, run time...)."""


class UnsupportedIsolation(InvalidOption):
    """A dedup enqueue in a transaction stricter than READ COMMITTED.

    Its snapshot predates the dedup lock, so it could not see a sibling that
    another enqueuer just committed; run it in a READ COMMITTED transaction.
    """


class DependencyCycle(InvalidOption):
    """Dependency rows that would make a job its own parent, or jobs wait for each other.

    Raised out of the flush that wrote them (roll the session back): nothing
    of that transaction can be committed.
    """


class SchemaNotMigrated(VenturiError):
    """The queue's tables are missing or older than this venturi expects."""


class JobNotFound(VenturiError, LookupError):
    """No job with the given id exists in the queue."""


class JobNotCompleted(VenturiError, LookupError):
    """A job's result was asked for, but the job is not ``completed`` (``status`` says what it is)."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


class InvalidJobId(InvalidOption, JobNotFound):
    """A job id that is not a ULID (26 characters of Crockford base32): no job can have it.

    Raised before any SQL by every call that takes a job id (and by the flush
    of a ``Job`` given such an id by hand); nothing is read or written.  A
    ``JobNotFound`` too, so a caller that handles unknown jobs handles it.
    """


class InvalidTransition(VenturiError):
    """An admin action asked for a state change the job's status forbids."""


class AsyncDriverMissing(VenturiError, RuntimeError):
    """An async database driver is needed (``ctx.session_async``, an async sibling engine) but none is installed."""


class JobCancelled(VenturiError):
    """Raised by ``ctx.raise_if_cancelled()`` in a run an operator cancelled (or that timed out).

    Let it propagate: the run then ends as its cancel decided (``dead`` with
    the cancel note, or a retryable timeout failure) and its ``ctx.session``
    work is rolled back.
    """


class LeaseLost(VenturiError):
    """This run no longer holds its job's claim (recovered, released or reclaimed elsewhere).

    Raised by ``ctx.checkpoint()`` when its fenced write found no row: nothing
    was written, and nothing else of the run will be committed.
    """


class SignalConflict(VenturiError):
    """``queue.signal`` with a payload other than the one already stored under that name for the job.

    Nothing was written; the first signal of a name wins (an identical repeat
    is a harmless duplicate).
    """


class TooManySignals(VenturiError):
    """``queue.signal`` past the job's cap: ``Queue(max_signals_per_job=...)`` signals or
    ``max_signal_bytes_per_job`` bytes of payloads in all.  Nothing was written.
    """


class Suspended(BaseException):  # noqa: N818 - the name is the API (``venturi_sa.Suspended``)
    """Raised by ``ctx.sleep``, ``ctx.sleep_until`` and ``ctx.wait_for`` to end the run until it may resume.

    A ``BaseException``, so ``except Exception`` in a handler cannot swallow
    it: let it propagate.  The run is then journaled ``paused`` with a note,
    the job is ``pending`` until ``until`` (the wake time, the wait's
    deadline, or never for a wait without a timeout, until its signal comes),
    and ``ctx.session`` commits with that outcome.  A handler that catches it
    and returns anyway ends as a retryable failure ("suspension swallowed").
    """

    def __init__(self, what: str, name: str, until: datetime | None, note: str) -> None:
        super().__init__(note)
        self.what = what  # "sleep" or "wait"
        self.name = name
        self.until = until
        self.note = note
