"""What a confirmation page confirmed, as one signed, expiring form field (any number of jobs up to the bound).

The field holds the action, the journal note, when the page was drawn, and
each job id with the status it had then (ids that named no job are kept
apart), as compact JSON compressed with zlib and encoded URL-safe base64,
followed by an HMAC-SHA256 under the dashboard's secret of that text and the
browser's CSRF token.  The MAC is checked before anything is decompressed, so
only a field this dashboard made (for this browser) is ever read; one older
than :data:`CONFIRM_SECONDS` is refused.  One field instead of one per id keeps
a 2,000-job confirmation far below any form's field limit (at most about 50 KB).
"""

from __future__ import annotations

import base64
import hmac
import json
import time
import zlib
from dataclasses import dataclass

from venturi_sa.web.security import sign

CONFIRM_SECONDS = 15 * 60
"""How long a confirmation page's button acts after the page was drawn."""
SELECTION_FIELD = "selection"


@dataclass(frozen=True, kw_only=True)
class Confirmed:
    """A decoded confirmation: the action, the note, and each job's status when it was confirmed."""

    action: str
    note: str
    issued: float
    statuses: dict[str, str | None]
    """``{id: status}`` grouped by status; None for an id that named no job."""

    @property
    def ids(self) -> list[str]:
        return list(self.statuses)


class BadConfirmation(Exception):
    """The field was altered, made for another browser or action, or expired: the one-line reason."""


def encode(secret: bytes, csrf: str, action: str, note: str, statuses: dict[str, str | None],
           now: float | None = None) -> str:
    """The signed field for confirming ``action`` with ``note`` on ``statuses`` (``{id: status or None}``)."""
    by_status: dict[str, list[str]] = {}
    for job_id, status in statuses.items():
        by_status.setdefault(status or "", []).append(job_id)
    body = {"a": action, "n": note, "t": int(time.time() if now is None else now), "s": by_status}
    packed = zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 9)
    text = base64.urlsafe_b64encode(packed).decode().rstrip("=")
    return f"{text}.{sign(secret, 'confirm', csrf, text)}"


def decode(secret: bytes, csrf: str, field: object, now: float | None = None) -> Confirmed:
    """The confirmation in ``field``; :class:`BadConfirmation` unless it is this dashboard's, for ``csrf``, fresh."""
    if not isinstance(field, str) or "." not in field:
        raise BadConfirmation("does not match what was submitted")
    text, _, mac = field.rpartition(".")
    if not hmac.compare_digest(mac, sign(secret, "confirm", csrf, text)):
        raise BadConfirmation("does not match what was submitted")
    body = json.loads(zlib.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))))
    age = (time.time() if now is None else now) - body["t"]
    if age > CONFIRM_SECONDS:
        raise BadConfirmation(f"expired ({CONFIRM_SECONDS // 60} minutes after its page was drawn)")
    statuses = {job_id: status or None for status, ids in body["s"].items() for job_id in ids}
    return Confirmed(action=body["a"], note=body["n"], issued=float(body["t"]), statuses=statuses)
