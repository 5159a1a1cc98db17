"""The ``advcalc`` command, from the wheel: the same command line as the Rust binary
(``advcalc run|inspect|compare|report|config|estimators``), for a machine that has the
``advcalc-rl`` wheel and no Rust toolchain. Installed as the ``advcalc`` script, and run
by ``python -m advcalc``.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run the command line with this process's arguments and exit with its status."""
    from . import _native

    sys.stdout.flush()
    sys.stderr.flush()
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "advcalc"
    if name in ("__main__.py", "-c", "-m", ""):
        name = "advcalc"
    sys.exit(_native.cli([name, *sys.argv[1:]]))


if __name__ == "__main__":
    main()
