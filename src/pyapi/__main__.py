"""`python -m seglog ...` runs the seglog command."""

import sys

from .cli import main

sys.exit(main())
