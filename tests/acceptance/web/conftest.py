"""The dashboard's fixtures (``support.fixtures.web``)."""

from support.fixtures.web import client, seeded  # noqa: F401 - fixtures
