"""Development and test tooling, never imported by the queue's runtime.

``throwaway`` starts a temporary local PostgreSQL cluster; the quick start
(``venturi quickstart``), the test suite and the benchmarks use it.  Nothing
under ``venturi_sa`` that enqueues, runs or operates jobs imports this package.
"""
