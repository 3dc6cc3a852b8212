"""Integrations with web frameworks (optional extras): :mod:`venturi_sa.contrib.flask`."""
