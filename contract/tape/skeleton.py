"""A DSSST1 frame's skeleton: everything but its tensor bytes, small enough for a tape.

The skeleton of a frame is its ``op`` metadata, its tree with each tensor leaf replaced by
the tensor's dtype, shape and value range (``{"$t": "F32", "shape": [2, 3], "v": [lo, hi],
"nf": ["nan"]}``), and runs of identical list items folded (``{"$rep": n, "node": item}``),
so a frame of 150,000 one-byte tensors is a few hundred bytes. A tensor's name is left out
when it is the one the codec gives a tensor at that place of the tree (``kwargs.input_ids``);
tensors the tree never names are listed apart (``extra``). A header whose ``dss`` text is not
in the codec's canonical form is kept as that text, its tensors all listed apart.

:func:`skeleton_tensors` regenerates the frame's header from its skeleton; the recorder keeps a
skeleton only when that header is the recorded one byte for byte, so a rebuilt frame
(``conformance.parity.rebuild``) differs from the recorded one in tensor values only.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

from contract.wire.basics import json_text
from contract.wire.frame import DTYPE_ITEMSIZE, DTYPES, ROOT_TENSOR_KEY, Spec, frame_prefix

#: A skeleton whose JSON is longer than this is not kept (the frame then needs its bytes).
SKELETON_CAP = 256 * 1024
_RANK = {code: i for i, code in enumerate(DTYPES)}


class Tensor(NamedTuple):
    """One tensor of a skeleton: its name in the frame, dtype code, shape and value range."""

    name: str
    code: str
    shape: list[int]
    stats: dict[str, Any]

    @property
    def nbytes(self) -> int:
        return DTYPE_ITEMSIZE[self.code] * math.prod(self.shape)


def _child(path: str | None, key: object) -> str:
    """The codec's name for a tensor below ``path`` (``contract.wire.tree``'s key paths)."""
    return str(key) if path is None else f"{path}.{key}"


def _leaf(name: str, code: str, shape: list[int], stats: dict[str, Any], default: str,
          opts: Any) -> dict[str, Any]:
    leaf: dict[str, Any] = {"$t": code, "shape": shape, **stats}
    if name != default:
        leaf["key"] = name
    if opts is not None:
        leaf["opts"] = opts
    return leaf


def _fold(items: list[Any]) -> list[Any]:
    """Runs of identical items as ``{"$rep": n, "node": item}``."""
    out: list[Any] = []
    last: str | None = None
    count, prev = 0, None
    for item in [*items, None]:
        text = repr(item) if item is not None else None  # repr tells 1, 1.0 and True apart
        if text is not None and text == last:
            count += 1
            continue
        if last is not None:
            out.append(prev if count == 1 else {"$rep": count, "node": prev})
        last, count, prev = text, 1, item
    return out


class _Outliner:
    """Turns a tree into its skeleton, taking each named tensor out of ``tensors``."""

    def __init__(self, tensors: dict[str, Tensor]) -> None:
        self.tensors = tensors
        self.used: set[str] = set()

    def node(self, node: Any, path: str | None) -> Any:
        if not isinstance(node, list) or not node:
            raise ValueError("not a tree node")
        tag = node[0]
        if tag == "j" and len(node) == 2:
            return node
        if tag == "t" and len(node) in (2, 3) and isinstance(node[1], str):
            name = node[1]
            t = self.tensors.get(name)
            if t is None or name in self.used:
                raise ValueError("a tree names a tensor the frame lacks, or names it twice")
            self.used.add(name)
            default = ROOT_TENSOR_KEY if path is None else path
            return _leaf(name, t.code, t.shape, t.stats, default, node[2] if len(node) == 3 else None)
        if tag == "d" and len(node) == 2 and isinstance(node[1], list):
            return ["d", [[pair[0], self.node(pair[1], _child(path, pair[0]))] for pair in node[1]]]
        if tag in ("l", "u") and len(node) == 2 and isinstance(node[1], list):
            return [tag, _fold([self.node(child, _child(path, i)) for i, child in enumerate(node[1])])]
        raise ValueError("malformed tree node")


def build_skeleton(meta: dict[str, Any], tensors: list[Tensor], header: bytes) -> dict[str, Any] | None:
    """The skeleton of a frame whose header bytes are ``header`` and whose tensors, in the
    frame's order, are ``tensors`` (None if no skeleton regenerates that header)."""
    if set(meta) - {"dss", "op"} or not isinstance(meta.get("dss"), str):
        return None
    by_name = {t.name: t for t in tensors}
    skel: dict[str, Any] = {"op": meta.get("op")}
    try:
        dss = json.loads(meta["dss"])
        canonical = (isinstance(dss, dict) and list(dss) == ["v", "tree"]
                     and json_text(dss, "dss") == meta["dss"])
    except ValueError:
        canonical = False
    outliner = _Outliner(by_name)
    if canonical:
        try:
            skel |= {"v": dss["v"], "tree": outliner.node(dss["tree"], None)}
        except (ValueError, TypeError, KeyError):
            outliner.used.clear()
            canonical = False
    if not canonical:
        skel["dss"] = meta["dss"]
    skel["extra"] = [[t.name, t.code, t.shape, t.stats] for t in tensors if t.name not in outliner.used]
    if len(json.dumps(skel)) > SKELETON_CAP:
        return None
    # The codec writes tensors in safetensors' order; a frame built by hand may list them as
    # its tree names them ("order": "tree"). ``tensors`` come in the recorded frame's order.
    if [t.name for t in tensors] != [t.name for t in _ordered(tensors, {})]:
        skel["order"] = "tree"
    try:
        dss, expanded = _expanded(skel)
        return skel if _prefix(dss, skel.get("op"), _ordered(expanded, skel)) == header else None
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def _expand(node: Any, path: str | None, out: list[Tensor]) -> Any:
    """The tree node a skeleton node stands for, collecting its tensors into ``out``."""
    if isinstance(node, dict) and "$t" in node:
        name = node.get("key", ROOT_TENSOR_KEY if path is None else path)
        out.append(Tensor(name, node["$t"], list(node["shape"]), _stats(node)))
        return ["t", name] if "opts" not in node else ["t", name, node["opts"]]
    tag = node[0]
    if tag == "j":
        return node
    if tag == "d":
        return ["d", [[k, _expand(child, _child(path, k), out)] for k, child in node[1]]]
    items: list[Any] = []
    for item in node[1]:
        repeat = item.get("$rep") if isinstance(item, dict) else None
        if repeat and _plain_leaf(item["node"]):
            items += _repeat_leaf(item["node"], int(repeat), path, len(items), out)
            continue
        for _ in range(int(repeat) if repeat else 1):
            items.append(_expand(item["node"] if repeat else item, _child(path, len(items)), out))
    return [tag, items]


def _stats(leaf: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in leaf.items() if k not in ("$t", "shape", "key", "opts")}


def _plain_leaf(node: Any) -> bool:
    return isinstance(node, dict) and "$t" in node and "key" not in node and "opts" not in node


def _repeat_leaf(leaf: dict[str, Any], n: int, path: str | None, first: int, out: list[Tensor]) -> list[Any]:
    """``n`` tensors like ``leaf``, each named by its place (the fast path of a long run)."""
    code, shape, stats = leaf["$t"], list(leaf["shape"]), _stats(leaf)
    names = [_child(path, i) for i in range(first, first + n)]
    out += [Tensor(name, code, shape, stats) for name in names]
    return [["t", name] for name in names]


def _expanded(skel: dict[str, Any]) -> tuple[str, list[Tensor]]:
    """The ``dss`` text and the tensors of a skeleton, in tree order (then the extras)."""
    tensors: list[Tensor] = []
    if "tree" in skel:
        dss = json_text({"v": skel["v"], "tree": _expand(skel["tree"], None, tensors)}, "dss")
    else:
        dss = skel["dss"]
    tensors += [Tensor(name, code, list(shape), stats) for name, code, shape, stats in skel.get("extra", [])]
    return dss, tensors


def _ordered(tensors: list[Tensor], skel: dict[str, Any]) -> list[Tensor]:
    if skel.get("order") == "tree":
        return tensors
    return sorted(tensors, key=lambda t: (_RANK[t.code], t.name))


def _prefix(dss: str, op: str | None, tensors: list[Tensor]) -> bytes:
    return frame_prefix(dss, op, [Spec(t.name, t.code, t.shape, t.nbytes, b"") for t in tensors])


def skeleton_tensors(skel: dict[str, Any]) -> tuple[bytes, list[Tensor]]:
    """The header (length field and padded JSON) of the frame a skeleton describes, and its
    tensors in the frame's order."""
    dss, tensors = _expanded(skel)
    ordered = _ordered(tensors, skel)
    return _prefix(dss, skel.get("op"), ordered), ordered
