"""HTTPS for the fake: a throwaway certificate authority made at start-up.

Why: the service's recipes and its reference client build ``https://{host}`` from a host
name and a PAT and verify TLS; they cannot be pointed at ``http://...``. ``trustme`` (the
``tls`` extra) makes a CA and a server certificate for the loopback names in memory; the
fake writes the CA bundle to a private directory and prints the environment a client needs
to trust it (``REQUESTS_CA_BUNDLE`` for requests, ``SSL_CERT_FILE`` for the ssl module and
httpx). Nothing is installed system-wide; the directory goes when the fake stops.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Names every fake certificate covers, whatever interface it binds.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: Environment variables that make Python clients trust the CA (requests; ssl and httpx).
CA_ENV_VARS = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
_WILDCARD = frozenset({"0.0.0.0", "::", ""})


class TlsUnavailable(RuntimeError):
    """``--tls`` without the ``tls`` extra installed."""


@dataclass
class TlsMaterial:
    """Paths of one start-up's CA bundle, server certificate chain and private key."""

    directory: Path
    ca_path: Path
    cert_path: Path
    key_path: Path

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def env(self) -> dict[str, str]:
        """The variables a Python client needs to trust this fake's certificate."""
        return dict.fromkeys(CA_ENV_VARS, str(self.ca_path))


def make_material(host: str = "127.0.0.1", directory: str | Path | None = None) -> TlsMaterial:
    """Make a CA and a certificate for ``host`` plus the loopback names; write them as PEM.

    ``directory`` (made if missing) keeps the files somewhere known; by default a private
    temporary directory is used, removed by :meth:`TlsMaterial.cleanup`.
    """
    try:
        import trustme
    except ImportError:
        raise TlsUnavailable(
            "--tls needs the 'tls' extra: pip install 'cortex-contract-kit[tls]' (trustme)"
        ) from None
    names = list(LOOPBACK_NAMES)
    if host not in _WILDCARD and host not in names:
        names.append(host)
    ca = trustme.CA(organization_name="fake-gs throwaway test CA")
    leaf = ca.issue_cert(*names)
    if directory is None:
        root = Path(tempfile.mkdtemp(prefix="fake-gs-tls-"))
    else:
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
    material = TlsMaterial(root, root / "ca.pem", root / "server-cert.pem", root / "server-key.pem")
    try:
        ca.cert_pem.write_to_path(str(material.ca_path))
        leaf.cert_chain_pems[0].write_to_path(str(material.cert_path))
        for extra in leaf.cert_chain_pems[1:]:
            extra.write_to_path(str(material.cert_path), append=True)
        leaf.private_key_pem.write_to_path(str(material.key_path))
        material.key_path.chmod(0o600)
    except BaseException:
        with contextlib.suppress(Exception):
            if directory is None:
                material.cleanup()
        raise
    return material


def uvicorn_ssl_options(material: TlsMaterial | None) -> dict[str, str]:
    """The ``uvicorn.Config`` keywords that serve HTTPS with ``material`` (none for HTTP)."""
    if material is None:
        return {}
    return {"ssl_certfile": str(material.cert_path), "ssl_keyfile": str(material.key_path)}
