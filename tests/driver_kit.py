"""The drivers the suites run on, and the test cluster through each of them."""

from __future__ import annotations

import sqlalchemy as sa

SYNC_DRIVERS = ("psycopg2", "psycopg")


def driver_url(pg_url: str, driver: str) -> str:
    """``pg_url`` with its drivername set to ``postgresql+<driver>``."""
    url = sa.make_url(pg_url).set(drivername=f"postgresql+{driver}")
    return url.render_as_string(hide_password=False)


def driver_engine(pg_url: str, driver: str, **kwargs: object) -> sa.Engine:
    """An engine on ``driver`` with the settings every test uses (UTC sessions, a roomy pool)."""
    kwargs.setdefault("pool_size", 20)
    kwargs.setdefault("max_overflow", 40)
    engine = sa.create_engine(driver_url(pg_url, driver), connect_args={"options": "-c timezone=UTC"}, **kwargs)
    assert engine.dialect.driver == driver, engine.dialect.driver
    return engine
