"""What a task's ``run`` returns: :class:`Complete`, :class:`Pause`, :class:`Retry` or :class:`Die`.

A handler returns one of :class:`Complete` (or ``None``), :class:`Pause`,
:class:`Retry` or :class:`Die`, or any other JSON value (the job's result:
recorded as ``Complete`` with the value as the run's attachment); an
exception counts as a :class:`Retry` whose note is the exception's message.
Each outcome checks its fields when it is built and raises
:class:`~venturi_sa.errors.InvalidOption` naming the bad one, so a handler
that builds a bad outcome raises inside the handler: a retryable failure
whose note is that message.  Each outcome is persisted together
with the handler's ``ctx.session`` work, fenced on the run's claim: if the
lease was lost, nothing of the run is committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from venturi_sa.errors import InvalidOption


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r:.80}"


def _check_note(owner: str, note: object, required: bool = False) -> None:
    if note is None and not required:
        return
    if not isinstance(note, str):
        wanted = "a str" if required else "a str or None"
        raise InvalidOption(f"{owner}.note must be {wanted}, got {_describe(note)}")


def _check_delay(owner: str, delay: object) -> None:
    if delay is None:
        return
    if not isinstance(delay, timedelta):
        raise InvalidOption(f"{owner}.delay must be a datetime.timedelta, got {_describe(delay)}")
    if delay < timedelta(0):
        raise InvalidOption(f"{owner}.delay must not be negative, got {delay!r}")


def _check_until(owner: str, until: object) -> None:
    if until is None:
        return
    if not isinstance(until, datetime):
        raise InvalidOption(f"{owner}.until must be a datetime.datetime, got {_describe(until)}")
    if until.utcoffset() is None:
        raise InvalidOption(
            f"{owner}.until must be timezone-aware (e.g. datetime.now(timezone.utc)), got naive {until!r}"
        )


@dataclass(frozen=True)
class Complete:
    """The job is done: ``completed``, ``finished_at`` set, kept as history."""

    note: str | None = None

    def __post_init__(self) -> None:
        _check_note("Complete", self.note)


@dataclass(frozen=True)
class Pause:
    """Not a failure: back to ``pending`` until ``until`` (or now + ``delay``).

    The carry is saved, so the next run resumes where this one stopped.  With
    neither ``until`` nor ``delay`` the job is eligible again at once.
    """

    until: datetime | None = None
    delay: timedelta | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        _check_until("Pause", self.until)
        _check_delay("Pause", self.delay)
        _check_note("Pause", self.note)


@dataclass(frozen=True)
class Retry:
    """A retryable failure: ``failure_count + 1``, eligible after the backoff.

    ``delay`` overrides the task's backoff.  At ``max_failures`` the job is
    ``dead`` instead (the backstop).
    """

    note: str | None = None
    delay: timedelta | None = None

    def __post_init__(self) -> None:
        _check_note("Retry", self.note)
        _check_delay("Retry", self.delay)


@dataclass(frozen=True)
class Die:
    """A failure retrying cannot fix: ``dead`` at once, ``finished_at`` set."""

    note: str

    def __post_init__(self) -> None:
        _check_note("Die", self.note, required=True)


RunOutcome = Complete | Pause | Retry | Die
RUN_OUTCOMES = (Complete, Pause, Retry, Die)
