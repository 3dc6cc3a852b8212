"""Why a pending job is held by a limit: the ``limited`` reasons of ``explain`` / ``venturi jobs why``.

Each names the limit in force (declared by the explaining queue's task, or
overridden at runtime) and its current use; read in ``explain``'s
transaction.  A limit declared only in the workers' code is not seen by a
queue without that task (the CLI's, the dashboard's): overrides are.
"""

from __future__ import annotations

from typing import Any

from venturi_sa.declarations.limit_rules import KindLimits
from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import limit_keys
from venturi_sa.storage import limits as store
from venturi_sa.task import Registry, declared_limits


def in_force(models: Models, session: Any, registry: Registry | None, kind: str) -> KindLimits:
    """``kind``'s limits in force: the overrides over what the registry's task declares."""
    declared = declared_limits(registry.get(kind)) if registry is not None and kind in registry else None
    return store.apply(declared, store.overrides(models, session, [kind]).get(kind))


def held(models: Models, session: Any, registry: Registry | None, job: Any) -> list[str]:
    """One sentence per limit that holds the pending, eligible ``job`` now (empty if none does)."""
    if job is None or job.status != Status.PENDING.value:
        return []
    limits = in_force(models, session, registry, job.kind)
    if not limits.any:
        return []
    texts = []
    if limits.global_concurrency is not None:
        used = store.claimed_counts(models, session, [job.kind]).get(job.kind, 0)
        if used >= limits.global_concurrency:
            texts.append(f"global_concurrency {limits.global_concurrency} of kind {job.kind!r} is full: "
                         f"{used} claimed")
    if limits.rate_limit is not None:
        started = store.starts_within(models, session, job.kind, limits.rate_limit.per)
        if started >= limits.rate_limit.limit:
            texts.append(f"rate_limit {limits.rate_limit} of kind {job.kind!r} is used up: {started} starts "
                         "in the window")
    key = limit_keys.key_of(models, session, job.id)
    if key is not None and limits.key_concurrency is not None:
        used = store.key_claimed(models, session, job.kind, key)
        if used >= limits.key_concurrency:
            texts.append(f"key_concurrency {limits.key_concurrency} of key {key!r} is full: {used} claimed")
    if key is not None and limits.key_rate_limit is not None:
        started = store.starts_within(models, session, job.kind, limits.key_rate_limit.per, key)
        if started >= limits.key_rate_limit.limit:
            texts.append(f"key_rate_limit {limits.key_rate_limit} of key {key!r} is used up: {started} starts "
                         "in the window")
    return texts


def held_counts(models: Models, session: Any, registry: Registry | None) -> dict[str, int]:
    """``kind -> eligible pending jobs held by a limit now`` (kinds with none left out), for ``stats``.

    A kind whose global concurrency is full or whose rate is used up holds
    all its eligible jobs; otherwise a full key holds that key's.
    """
    kinds = set(store.overrides(models, session))
    if registry is not None:
        kinds |= {t.KIND for t in registry if declared_limits(t).any}
    counts: dict[str, int] = {}
    for kind in sorted(kinds):
        limits = in_force(models, session, registry, kind)
        full = (limits.global_concurrency is not None
                and store.claimed_counts(models, session, [kind]).get(kind, 0) >= limits.global_concurrency)
        full = full or (limits.rate_limit is not None and store.starts_within(
            models, session, kind, limits.rate_limit.per) >= limits.rate_limit.limit)
        if full:
            n = store.eligible_count(models, session, kind)
        elif limits.key_concurrency is not None:
            n = store.held_by_key(models, session, kind, limits.key_concurrency)
        else:
            n = 0
        if n:
            counts[kind] = n
    return counts
