"""The reliability fixtures: a private cluster per module (``support.fixtures.reliability``)."""

from support.fixtures.reliability import cluster, db, probe, queue, rel_prefix, workers  # noqa: F401 - fixtures
