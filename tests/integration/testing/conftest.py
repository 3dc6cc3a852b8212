"""The fixtures of the tests of ``venturi_sa.testing`` (``support.fixtures.testing``)."""

from support.fixtures.testing import no_rows_left, notes_table, venturi_engine, venturi_queue  # noqa: F401 - fixtures
