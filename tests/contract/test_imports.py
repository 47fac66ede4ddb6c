"""``import contract`` stays light: no torch, server, HTTP client or test framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "safetensors", "starlette", "uvicorn", "requests", "hypothesis", "schemathesis", "numpy")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in out.stdout.split()}


def test_import_contract_pulls_nothing_heavy() -> None:
    loaded = _loaded_after(
        "import contract, contract.routes, contract.models, contract.clauses, contract.shapes, "
        "contract.openapi, contract.wire"
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.heavy
def test_codec_loads_torch_on_first_tensor() -> None:
    import torch

    from contract import wire

    frame = wire.dumps({"x": torch.arange(3)}).hex()
    code = (
        "import sys; from contract import wire; "
        "before = 'torch' in sys.modules; "
        "wire.loads(wire.dumps({'a': 1})); json_only = 'torch' in sys.modules; "
        f"obj = wire.loads(bytes.fromhex('{frame}')); "
        "print(before, json_only, 'torch' in sys.modules, obj['x'].tolist())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True", "[0,", "1,", "2]"]
