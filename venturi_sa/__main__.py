"""``python -m venturi_sa`` runs the ``venturi`` command."""

from __future__ import annotations

from venturi_sa.cli import main

if __name__ == "__main__":
    main()
