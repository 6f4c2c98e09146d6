"""Where the API server is and how Tickwork proves who it is.

Importing the official ``kubernetes`` package costs a process ~32 MiB of RSS (it
imports the model of every object of every API group: 10.6 MiB for an empty
interpreter, 42.9 MiB after ``import kubernetes``), and the operator and the
workers need none of it but its credential loaders. Tickwork therefore reads the
two shapes a deployment has itself:

* in a Pod, the service account: the API server from ``KUBERNETES_SERVICE_HOST``
  and ``_PORT``, the cluster's CA, and the token, read again every minute (the
  kubelet rotates bound tokens);
* a kubeconfig whose user has a token, a token file or a client certificate (as a
  file or inline data), and whose cluster names its CA (file or data) or skips TLS
  verification.

Anything else a kubeconfig can say — exec plugins, auth providers, basic auth, a
proxy, a TLS server name, several files in ``KUBECONFIG`` — goes to the official
loaders (token refresh and exec included), imported only then.
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: A token file (the service account's, a kubeconfig's tokenFile) is read again this
#: often; a refresh hook of the official loaders is called as often.
TOKEN_REREAD_SECONDS = 60.0

_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "extensions",
    }
)
_USER_KEYS = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-key",
        "client-certificate-data",
        "client-key-data",
        "extensions",
    }
)


class CredentialsError(Exception):
    """The kubeconfig or the service account cannot be used: says why."""


@dataclass
class Connection:
    """The API server's address and what a request needs to reach it as Tickwork."""

    host: str
    verify: bool = True
    ca_file: str | None = None
    ca_data: str | None = None
    """PEM text of the CA (a kubeconfig's certificate-authority-data)."""
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    """Read again every :data:`TOKEN_REREAD_SECONDS` (the kubelet rotates it)."""
    refresh: Callable[[], str | None] | None = None
    """For the official loaders: the Authorization header's value, refreshed."""
    _read_at: float = field(default=-float("inf"), repr=False)

    def authorization(self) -> dict[str, str]:
        """The Authorization header, if the credentials have one."""
        now = time.monotonic()
        if (self.token_file or self.refresh) and now - self._read_at > TOKEN_REREAD_SECONDS:
            if self.refresh is not None:
                value = self.refresh()
                self.token = value or None
            elif self.token_file:
                self.token = "Bearer " + Path(self.token_file).read_text().strip()
            self._read_at = now
        return {"Authorization": self.token} if self.token else {}

    def expire(self) -> None:
        """Read the token again before the next request (the server refused it)."""
        self._read_at = -float("inf")

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The server's CA and the client certificate, if any; False (aiohttp's "do
        not verify") only if the configuration says so."""
        if self.host.startswith("http://"):
            return False
        if not self.verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


def load_configuration(kubeconfig: str | None = None) -> Connection:
    """In-cluster credentials when running in a pod (and no kubeconfig is named),
    else the kubeconfig (``kubeconfig``, else ``$KUBECONFIG``, else ~/.kube/config)."""
    if kubeconfig is None and in_cluster():
        return service_account()
    path = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    if os.pathsep in path:
        return _official(kubeconfig)  # several files, merged: the official loader's job
    return from_kubeconfig(Path(path)) or _official(path)


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").exists()


def service_account(root: Path = SERVICE_ACCOUNT) -> Connection:
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise CredentialsError("KUBERNETES_SERVICE_HOST is not set: not in a pod")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    connection = Connection(
        host=f"https://{host}:{port}", ca_file=str(root / "ca.crt"), token_file=str(root / "token")
    )
    connection.authorization()  # a missing or unreadable token fails here, not later
    return connection


def from_kubeconfig(path: Path) -> Connection | None:
    """The kubeconfig's current context as a connection; None if it says more than
    Tickwork reads itself (then the official loader is used)."""
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise CredentialsError(f"cannot read the kubeconfig {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise CredentialsError(f"the kubeconfig {path} is not a mapping")
    current = config.get("current-context")
    context = _named(config, "contexts", current, "context")
    if context is None:
        raise CredentialsError(f"the kubeconfig {path} has no context {current!r}")
    cluster = _named(config, "clusters", context.get("cluster"), "cluster")
    user = _named(config, "users", context.get("user"), "user") or {}
    if cluster is None:
        raise CredentialsError(f"the kubeconfig {path} has no cluster {context.get('cluster')!r}")
    if set(cluster) - _CLUSTER_KEYS or set(user) - _USER_KEYS or not cluster.get("server"):
        return None
    base = path.parent
    connection = Connection(
        host=str(cluster["server"]).rstrip("/"),
        verify=not cluster.get("insecure-skip-tls-verify", False),
        ca_file=_relative(base, cluster.get("certificate-authority")),
        ca_data=_decoded(cluster.get("certificate-authority-data")),
        cert_file=_relative(base, user.get("client-certificate")),
        key_file=_relative(base, user.get("client-key")),
        token_file=_relative(base, user.get("tokenFile")),
    )
    if user.get("token"):
        connection.token = f"Bearer {user['token']}"
        connection.token_file = None
    if user.get("client-certificate-data") and user.get("client-key-data"):
        folder = _private_folder()
        connection.cert_file = _written(folder / "client.crt", user["client-certificate-data"])
        connection.key_file = _written(folder / "client.key", user["client-key-data"])
    return connection


def _named(config: dict[str, Any], section: str, name: Any, key: str) -> dict[str, Any] | None:
    for item in config.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            found = item.get(key)
            return found if isinstance(found, dict) else {}
    return None


def _relative(base: Path, value: Any) -> str | None:
    return str(base / str(value)) if value else None


def _decoded(value: Any) -> str | None:
    return base64.b64decode(str(value)).decode() if value else None


def _private_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="tickwork-credentials-"))  # mode 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _written(path: Path, data: str) -> str:
    path.write_bytes(base64.b64decode(data))
    path.chmod(0o600)
    return str(path)


def _official(kubeconfig: str | None) -> Connection:
    """The official loaders, for what :func:`from_kubeconfig` does not read."""
    from kubernetes import client as k8s_client  # noqa: PLC0415 - ~32 MiB, only if needed
    from kubernetes import config as k8s_config  # noqa: PLC0415

    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]

    def header() -> str | None:
        hook = getattr(configuration, "refresh_api_key_hook", None)
        if hook is not None:
            hook(configuration)  # re-runs an exec plugin or refreshes a provider's token
        # The loaders file a bearer token under "BearerToken"; older ones "authorization".
        token = configuration.api_key.get("BearerToken") or configuration.api_key.get(
            "authorization"
        )
        prefix = configuration.api_key_prefix.get("BearerToken")
        return f"{prefix} {token}" if token and prefix else token

    return Connection(
        host=configuration.host,
        verify=bool(configuration.verify_ssl),
        ca_file=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        refresh=header,
    )
