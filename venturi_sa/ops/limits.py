"""Limits at runtime: ``queue.set_limit``, ``queue.clear_limit`` and ``queue.limits`` (docs/limits.md).

``set_limit`` and ``clear_limit`` each run in one short transaction
(committed on return, rolled back on any error: a refused or failed call
changes nothing; a crash before commit leaves everything as it was).  An
override holds from every worker's next claim after the commit, and each
change is recorded in ``<prefix>_limit_history`` with its actor.  Lowering a
limit below its current use never interrupts a running job: the claims wait
until the use falls under it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from venturi_sa.declarations.limit_rules import KindLimits, Rate, check_count
from venturi_sa.errors import InvalidOption
from venturi_sa.models import Models
from venturi_sa.models.limit_tables import LIMIT_NAMES
from venturi_sa.ops.checks import DEFAULT_ACTOR, check_text
from venturi_sa.ops.records import jsonable
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.storage import limits as store
from venturi_sa.task import KIND_PATTERN, Registry, declared_limits, is_keyed


class Unset(enum.Enum):
    """The default of ``set_limit``'s arguments: leave that limit as it is."""

    UNSET = "unset"


UNSET = Unset.UNSET
Count = int | None | Unset
Rated = Rate | None | Unset
KEY_LIMITS = ("key_concurrency", "key_rate_limit")


@dataclass(frozen=True)
class LimitInfo:
    """One limit of one kind: its value in force, where it comes from, and its current use.

    ``in_use`` counts claimed jobs for ``global_concurrency``, starts in the
    window for ``rate_limit``; for the key limits, those of the busiest key
    (named in ``key``).  ``source`` is ``"override"`` (``queue.set_limit``) or
    ``"declared"`` (the task class in this queue's registry).
    """

    kind: str
    name: str
    value: int | Rate | None
    source: Literal["declared", "override"]
    in_use: int
    key: str | None = None

    def as_dict(self) -> dict[str, Any]:
        value = {"limit": self.value.limit, "per": self.value.per} if isinstance(self.value, Rate) else self.value
        return {"kind": self.kind, "name": self.name, "value": jsonable(value), "source": self.source,
                "in_use": self.in_use, "key": self.key}

    def describe(self) -> str:
        """``"global_concurrency 3 (override), 2 in use"``."""
        shown = "none" if self.value is None else str(self.value)
        of_key = f" (key {self.key!r})" if self.key is not None else ""
        return f"{self.name} {shown} ({self.source}), {self.in_use} in use{of_key}"


def _check_kind(kind: object) -> str:
    text = check_text(kind, "kind", required=True) or ""
    if not KIND_PATTERN.fullmatch(text):
        raise InvalidOption(f"kind {text!r} is not a kind (1-200 letters, digits and _.:-/; no patterns)")
    return text


def _checked(name: str, value: object) -> int | Rate | None:
    if value is None:
        return None
    if name in store.RATES:
        if not isinstance(value, Rate):
            raise InvalidOption(f"{name} must be None or venturi_sa.Rate(limit, per=timedelta), got {value!r}")
        return value
    return check_count(value, name)


def set_limit(models: Models, registry: Registry, engine: sa.Engine, kind: str, values: dict[str, object],
              actor: str = DEFAULT_ACTOR) -> list[LimitInfo]:
    """Override the given limits of ``kind`` (None: no limit; 0 is refused, use a pause); the kind's limits after.

    Arguments left out stay as they are.  ``InvalidOption`` names a bad
    value, writing nothing; so does a key limit (``key_concurrency``,
    ``key_rate_limit``) for a kind of ``registry`` whose task does not
    override ``limit_key``, which it could never limit.  A kind the
    registry does not know is taken as given (the CLI without ``--app``).
    """
    kind = _check_kind(kind)
    given = {name: _checked(name, value) for name, value in values.items() if value is not UNSET}
    if not given:
        raise InvalidOption(f"set_limit needs at least one of {', '.join(LIMIT_NAMES)}")
    _check_keyed(registry, kind, given)
    who = check_text(actor, "actor", required=True) or actor
    with short_transaction(models, engine) as session:
        store.set_overrides(models, session, kind, given, who)
    return [info for info in limits(models, registry, engine) if info.kind == kind]


def _check_keyed(registry: Registry, kind: str, given: dict[str, int | Rate | None]) -> None:
    """``InvalidOption`` if ``given`` sets a key limit on a known kind without ``limit_key``."""
    keyed = [name for name in KEY_LIMITS if given.get(name) is not None]
    if keyed and kind in registry and not is_keyed(registry.get(kind)):
        raise InvalidOption(f"kind {kind!r} declares no limit_key, so {' and '.join(keyed)} would limit nothing; "
                            f"override limit_key(self) in its task, or set global_concurrency or rate_limit")


def clear_limit(models: Models, engine: sa.Engine, kind: str, names: tuple[str, ...],
                actor: str = DEFAULT_ACTOR) -> list[str]:
    """Remove the named overrides of ``kind`` (all of them if none named); the names that were overridden."""
    kind = _check_kind(kind)
    unknown = [n for n in names if n not in LIMIT_NAMES]
    if unknown:
        raise InvalidOption(f"unknown limit name(s) {', '.join(map(repr, unknown))}; "
                            f"limits are {', '.join(LIMIT_NAMES)}")
    who = check_text(actor, "actor", required=True) or actor
    with short_transaction(models, engine) as session:
        return store.clear_overrides(models, session, kind, list(names or LIMIT_NAMES), who)


def limits(models: Models, registry: Registry, engine: sa.Engine) -> list[LimitInfo]:
    """Every limit in force: declared by the registry's tasks or overridden, with its use (read-only)."""
    declared = {t.KIND: declared_limits(t) for t in registry}
    with short_transaction(models, engine) as session:
        found = store.overrides(models, session)
        kinds = sorted(set(declared) | set(found))
        infos: list[LimitInfo] = []
        for kind in kinds:
            mine = declared.get(kind, KindLimits())
            for name in LIMIT_NAMES:
                overridden = name in found.get(kind, {})
                value = found[kind][name] if overridden else getattr(mine, name)
                if value is None and not overridden:
                    continue
                use, key = _use(models, session, kind, name, value)
                infos.append(LimitInfo(kind=kind, name=name, value=value,
                                       source="override" if overridden else "declared", in_use=use, key=key))
        return infos


def _use(models: Models, session: Any, kind: str, name: str, value: int | Rate | None) -> tuple[int, str | None]:
    if name == "global_concurrency":
        return store.claimed_counts(models, session, [kind]).get(kind, 0), None
    if name == "key_concurrency":
        key, n = store.busiest_key(models, session, kind)
        return n, key
    if isinstance(value, Rate):
        return store.starts_within(models, session, kind, value.per), None
    return 0, None
