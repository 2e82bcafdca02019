"""``python -m fairwin``: the same as the ``fairwin`` command."""

import sys

from fairwin.cli import main

sys.exit(main())
