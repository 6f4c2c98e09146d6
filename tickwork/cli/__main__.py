"""``python -m tickwork.cli``: the CLI (also the entry of the kubectl plugin's binary)."""

from __future__ import annotations

import sys

from tickwork.cli import main

if __name__ == "__main__":
    sys.exit(main())
