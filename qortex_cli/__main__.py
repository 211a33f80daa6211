"""``python -m qortex_cli ...``: the ``qortex`` command."""

import sys

from qortex_cli.main import run

sys.exit(run())
