"""Integrations (optional extras): :mod:`venturi_sa.contrib.flask` (web framework), :mod:`venturi_sa.contrib.otel`."""
