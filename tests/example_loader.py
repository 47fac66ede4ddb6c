"""Load a script of ``examples/`` as a module, for the tests that drive it.

``examples/`` is not a package, so its scripts are loaded by path. Import it as
``from example_loader import load_example`` from any test directory: ``tests/conftest.py``
puts ``tests/`` on ``sys.path`` (pytest's default ``prepend`` import mode), as each test
directory's own helper modules (``fake_gs_api``, ``e2e_fake``) are found through theirs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """Execute ``examples/<name>.py`` afresh as module ``name``.

    The module is registered in ``sys.modules`` first: dataclasses resolve their
    annotations through it.
    """
    if str(EXAMPLES) not in sys.path:  # its sibling modules, as ``python examples/x.py`` finds them
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
