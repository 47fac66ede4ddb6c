"""Options of the stress tests: soak size and schemathesis negative case count.

CI runs the small sizes (fast, parallel-safe: free ports, no shared files); a local run
asks for the large ones::

    pytest tests/stress --soak-size large --negative-cases 2000 --fault-examples 300

Each option also reads an environment variable (SOAK_SIZE, NEGATIVE_CASES, FAULT_EXAMPLES);
use those when running the whole tree (``pytest tests``), where this conftest is not loaded
early enough to register command-line options.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("stress", "fault, soak and hostile-input tests")
    g.addoption("--soak-size", choices=("small", "large"), default=os.environ.get("SOAK_SIZE", "small"),
                help="soak test size: small (CI, < 60 s) or large (local; thousands of ops)")
    g.addoption("--negative-cases", type=int, default=int(os.environ.get("NEGATIVE_CASES", "300")),
                help="schemathesis negative-mode cases in total (2000+ locally)")
    g.addoption("--fault-examples", type=int, default=int(os.environ.get("FAULT_EXAMPLES", "40")),
                help="hypothesis examples of the fault-schedule property")


@pytest.fixture(scope="session")
def soak_size(pytestconfig: pytest.Config) -> str:
    return str(pytestconfig.getoption("--soak-size", default=os.environ.get("SOAK_SIZE", "small")))


@pytest.fixture(scope="session")
def negative_cases(pytestconfig: pytest.Config) -> int:
    return int(pytestconfig.getoption("--negative-cases", default=os.environ.get("NEGATIVE_CASES", "300")))


@pytest.fixture(scope="session")
def fault_examples(pytestconfig: pytest.Config) -> int:
    return int(pytestconfig.getoption("--fault-examples", default=os.environ.get("FAULT_EXAMPLES", "40")))
