"""``python -m autocutlass.cli ...``: the ``autocutlass`` command."""

import sys

from autocutlass.cli import main

sys.exit(main())
