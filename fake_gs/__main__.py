"""``python -m fake_gs``: same as the ``fake-gs`` console script."""

from fake_gs.cli import main

raise SystemExit(main())
