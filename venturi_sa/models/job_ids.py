"""Job ids: ULIDs, one at a time or many of one millisecond in increasing order."""

from __future__ import annotations

import os
import re
import time

from ulid import ULID

from venturi_sa.errors import InvalidJobId


def new_job_id() -> str:
    """A fresh ULID in its canonical 26-character form."""
    return str(ULID())


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # ULID's base32 digits
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # 10 bits -> 2 digits
_RANDOM_BITS = 80


def _ulid_text(value: int) -> str:
    """The 26 base32 digits of a 128-bit ULID value (the first digit holds its top 3 bits)."""
    pairs = "".join(_PAIRS[(value >> shift) & 1023] for shift in range(110, -1, -10))
    return _CROCKFORD[value >> 125] + _CROCKFORD[(value >> 120) & 31] + pairs


def new_job_ids(n: int) -> list[str]:
    """``n`` fresh ULIDs of one millisecond, increasing in the order given (ULID's monotonic form).

    The first takes 79 random bits (the top random bit cleared, so adding
    up to 2**79 never carries into the timestamp); each next one is the
    previous plus one, so only its last four digits need encoding (the
    rest is re-encoded once per 2**20 ids).
    """
    first = (time.time_ns() // 1_000_000) << _RANDOM_BITS | int.from_bytes(os.urandom(10), "big") >> 1
    ids: list[str] = []
    high, prefix = -1, ""
    for value in range(first, first + max(0, n)):
        if value >> 20 != high:
            high, prefix = value >> 20, _ulid_text(value)[:22]
        ids.append(prefix + _PAIRS[(value >> 10) & 1023] + _PAIRS[value & 1023])
    return ids


_ULID_FORM = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")  # the canonical form: 128 bits, upper case


def check_job_id(value: object, what: str = "job id") -> str:
    """``value`` if it is a job id in ULID form; else ``InvalidJobId`` naming ``what`` (checked before any SQL)."""
    if isinstance(value, str) and _ULID_FORM.fullmatch(value):
        return value
    shown = f"{value!r:.80}" if isinstance(value, str) else f"a {type(value).__name__}"
    raise InvalidJobId(f"{what} must be a ULID (26 characters of upper-case Crockford base32, e.g. "
                       f"01JD0Q8B6T5ZP3Y9M4W2XKQ7RN), got {shown}: no job has such an id")
