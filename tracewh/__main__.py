"""``python -m tracewh``: the command line (the same as the ``tracewh`` script)."""

from __future__ import annotations

from tracewh.cli import run

if __name__ == "__main__":
    run()
