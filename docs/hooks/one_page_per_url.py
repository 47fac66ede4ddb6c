"""mkdocs hook: two pages that build to one URL fail the build (mkdocs only warns, and not
under --strict: ``parity.md`` and ``parity/index.md`` both became /parity/ and one page
could never be opened)."""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError


def collisions(dest_uris: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Output path -> the source pages that build to it, where more than one does."""
    seen: dict[str, list[str]] = {}
    for src, dest in dest_uris:
        seen.setdefault(dest, []).append(src)
    return {dest: srcs for dest, srcs in seen.items() if len(srcs) > 1}


def on_files(files: Any, config: Any) -> Any:
    found = collisions([(f.src_uri, f.dest_uri) for f in files])
    if found:
        raise PluginError("pages that build to the same URL: " + "; ".join(
            f"{dest} <- {', '.join(srcs)}" for dest, srcs in sorted(found.items())))
    return files
