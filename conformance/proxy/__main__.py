"""``python -m conformance.proxy``: gs-proxy."""

from conformance.proxy.cli import main

raise SystemExit(main())
