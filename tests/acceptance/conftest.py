"""Fixtures of the acceptance tier (real processes) beyond the root ones."""

from support.fixtures.sqlmodel import sqlmodel_app  # noqa: F401 - fixtures
