"""A database test clock: move venturi's ``now()`` for one session's transaction."""

from __future__ import annotations

from datetime import datetime, timedelta

from venturi_sa.errors import InvalidOption
from venturi_sa.storage import clock as dbclock
from venturi_sa.testing.sessions import AnySession, as_session


class Clock:
    """The database clock of ``session``'s current transaction, as venturi reads it.

    ``set`` and ``advance`` freeze the clock: from then on every venturi
    statement in this transaction (claim eligibility, ``delay``/``run_at``
    at enqueue, backoff, pauses, ``finished_at``, lease expiry and
    recovery, stats) reads the frozen time, and so does any unqualified
    ``now()``, ``statement_timestamp()`` or ``clock_timestamp()`` of your
    own in that transaction.  Other connections (a real ``Worker``) are not
    affected; commit or rollback ends it (see
    :mod:`venturi_sa.storage.clock` for how).  Needs ``CREATE`` on the
    database.
    """

    def __init__(self, session: AnySession) -> None:
        self._session = session

    def now(self) -> datetime:
        """The time venturi's statements read now: the frozen time, or the database's real clock."""
        return dbclock.current_time(as_session(self._session))

    def set(self, at: datetime) -> datetime:
        """Freeze the clock at ``at`` (timezone-aware); returns it."""
        if not isinstance(at, datetime) or at.utcoffset() is None:
            raise InvalidOption(f"clock.set needs a timezone-aware datetime, got {at!r}")
        session = as_session(self._session)
        dbclock.engage(session)
        dbclock.freeze(session, at)
        return self.now()

    def advance(self, by: timedelta) -> datetime:
        """Move the clock ``by`` from its current time (freezing it there); returns the new time."""
        if not isinstance(by, timedelta):
            raise InvalidOption(f"clock.advance needs a timedelta, got {by!r}")
        return self.set(self.now() + by)

    def freeze(self) -> datetime:
        """Stop the clock at the database's current time; returns it."""
        return self.set(self.now())

    @property
    def frozen(self) -> bool:
        return dbclock.frozen_at(as_session(self._session)) is not None

    def reset(self) -> None:
        """Back to the real database clock for the rest of the transaction."""
        dbclock.disengage(as_session(self._session))


def clock(session: AnySession) -> Clock:
    """The test clock of ``session``'s transaction (see :class:`Clock`)."""
    return Clock(session)


__all__ = ["Clock", "clock"]
