"""The runtime-control fixtures (``support.fixtures.control``)."""

from support.fixtures.control import gate, procs  # noqa: F401 - fixtures
