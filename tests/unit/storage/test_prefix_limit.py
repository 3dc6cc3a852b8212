"""The prefix length limit: every name PostgreSQL derives from a prefix fits 63 bytes."""

from __future__ import annotations

import pytest

from venturi_sa import make_models
from venturi_sa.errors import BadPrefix
from venturi_sa.prefix import LONGEST_SUFFIX, MAX_PREFIX_LENGTH, PG_IDENTIFIER_MAX, validate_prefix


def derived_names(prefix: str) -> set[str]:
    """Every name PostgreSQL gives the queue's objects, up to and including version 18.

    Named constraints and indexes come from the mapped tables; PostgreSQL adds
    the identity sequence, the version table's primary key and (from 18 on) a
    ``<table>_<column>_not_null`` constraint per NOT NULL column.
    """
    metadata = make_models(prefix).metadata
    names = {f"{prefix}_alembic_version", f"{prefix}_alembic_version_pkc", f"{prefix}_journal_id_seq"}
    for table in metadata.tables.values():
        names.add(table.name)
        names |= {str(c.name) for c in table.constraints if c.name is not None}
        names |= {str(i.name) for i in table.indexes if i.name is not None}
        names |= {f"{table.name}_{column.name}_not_null" for column in table.columns if not column.nullable}
    return names


def test_the_longest_derived_name_is_the_documented_one() -> None:
    prefix = "p"
    longest = max(derived_names(prefix), key=len)
    assert longest == prefix + LONGEST_SUFFIX == "p_journal_recorded_at_not_null"
    assert MAX_PREFIX_LENGTH == PG_IDENTIFIER_MAX - len(LONGEST_SUFFIX) == 34


def test_every_derived_name_of_the_longest_prefix_fits() -> None:
    prefix = "q" * MAX_PREFIX_LENGTH
    assert validate_prefix(prefix) == prefix
    assert max(len(name.encode()) for name in derived_names(prefix)) == PG_IDENTIFIER_MAX


def test_one_more_character_is_refused_naming_the_limit_and_the_reason() -> None:
    with pytest.raises(BadPrefix) as refused:
        validate_prefix("q" * (MAX_PREFIX_LENGTH + 1))
    message = str(refused.value)
    assert "is 35 characters; at most 34 are allowed" in message
    assert "<prefix>_journal_recorded_at_not_null" in message and "63-byte" in message
