"""``gs-load``: Locust's command line with gs-load's locustfile and options.

Every Locust option works as Locust documents it (``--users``, ``--spawn-rate``,
``--run-time``, ``--headless``, ``--master``, ``--worker --master-host H``,
``--processes N``, ``--html FILE``, ``--csv PREFIX``, ...); gs-load adds its own
(:mod:`conformance.load.options`). Without ``--stop-timeout`` a user finishes the iteration
it is in (up to 10 s) when the run stops, so few calls are cut in flight.

Exit status: 0 when the run's counted contract violations stay within
``--max-violations``, 1 past it, 2 when the run could not be set up or sent nothing, 3
when nothing (or no Cortex Training API) answers at ``--url``.
"""

from __future__ import annotations

import sys
from pathlib import Path

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
#: Seconds a user may take to finish its iteration when the run stops (Locust: 0).
STOP_TIMEOUT_S = "10"


def locust_argv(argv: list[str]) -> list[str]:
    """Locust's argv for gs-load's: the locustfile first, the stop timeout unless given, and
    the web UI and master on loopback unless told otherwise (Locust's defaults listen on
    every interface; beyond loopback needs --load-secret, :mod:`conformance.load.surface`)."""
    from conformance.load.surface import default_binds

    given = any(a == "--stop-timeout" or a.startswith("--stop-timeout=") for a in argv)
    return ["-f", str(LOCUSTFILE), *([] if given else ["--stop-timeout", STOP_TIMEOUT_S]),
            *default_binds(argv), *argv]


def own_help() -> str:
    """gs-load's options (Locust prints its own help before it loads a locustfile, so it
    never shows them)."""
    import argparse

    from conformance.load.options import add_locust_arguments

    parser = argparse.ArgumentParser(
        prog="gs-load", add_help=False,
        description="gs-load: the contract under many concurrent RL loops, on Locust "
                    "(docs/load.md). Its own options first, then Locust's.")
    add_locust_arguments(parser)
    return parser.format_help()


def main(argv: list[str] | None = None) -> int:
    """Run Locust (it exits the process with the run's status)."""
    # Locust patches the standard library for gevent on import: before anything else loads.
    from locust import main as locust_main

    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(own_help())
    sys.argv = ["gs-load", *locust_argv(args)]
    locust_main.main()
    return 0  # pragma: no cover - Locust's main always exits


if __name__ == "__main__":
    sys.exit(main())
