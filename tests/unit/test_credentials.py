"""Credentials without the official client: a kubeconfig with inline or file
certificates, a token or a token file (read again as it rotates), the in-cluster
service account, the official loaders for what else a kubeconfig says (an exec
plugin, run for real), clear errors for a kubeconfig that cannot be used, and a
worker that never imports the ``kubernetes`` package (~32 MiB of RSS)."""

from __future__ import annotations

import base64
import json
import os
import ssl
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tickwork.kube import credentials
from tickwork.kube.credentials import (
    Connection,
    CredentialsError,
    from_kubeconfig,
    load_configuration,
    service_account,
)
from tickwork_dev.devcluster.certs import generate_server_tls

pytestmark = pytest.mark.unit


def kubeconfig(path: Path, *, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "here",
                "contexts": [
                    {"name": "elsewhere", "context": {"cluster": "x", "user": "x"}},
                    {"name": "here", "context": {"cluster": "c", "user": "u"}},
                ],
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    return path


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def test_inline_certificates_are_written_privately_and_load(tmp_path: Path) -> None:
    tls = generate_server_tls(tmp_path / "pki")
    cluster = {"server": "https://127.0.0.1:6443/", "certificate-authority-data": b64(tls.ca_cert)}
    user = {"client-certificate-data": b64(tls.cert), "client-key-data": b64(tls.key)}
    path = kubeconfig(tmp_path / "config", cluster=cluster, user=user)
    connection = load_configuration(str(path))
    assert connection.host == "https://127.0.0.1:6443"
    assert connection.ca_data == tls.ca_cert.read_text()
    assert connection.cert_file
    assert connection.key_file
    assert Path(connection.cert_file).read_bytes() == tls.cert.read_bytes()
    assert stat.S_IMODE(Path(connection.key_file).stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(connection.key_file).parent.stat().st_mode) == 0o700
    context = connection.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] == 1  # the kubeconfig's CA, not the system's
    assert connection.authorization() == {}


def test_files_are_relative_to_the_kubeconfig_and_tls_can_be_skipped(tmp_path: Path) -> None:
    tls = generate_server_tls(tmp_path / "pki")
    path = kubeconfig(
        tmp_path / "config",
        cluster={"server": "https://10.0.0.1", "certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/server.crt", "client-key": "pki/server.key"},
    )
    connection = from_kubeconfig(path)
    assert connection is not None
    assert connection.ca_file == str(tmp_path / "pki" / "ca.crt") == str(tls.ca_cert)
    assert (connection.cert_file, connection.key_file) == (str(tls.cert), str(tls.key))
    insecure = kubeconfig(
        tmp_path / "insecure",
        cluster={"server": "https://10.0.0.1", "insecure-skip-tls-verify": True},
        user={},
    )
    context = load_configuration(str(insecure)).ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_NONE


def test_a_token_file_is_read_again_as_it_rotates(tmp_path: Path, monkeypatch: Any) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    path = kubeconfig(
        tmp_path / "config", cluster={"server": "https://h"}, user={"tokenFile": "token"}
    )
    clock = [1000.0]
    monkeypatch.setattr(credentials.time, "monotonic", lambda: clock[0])
    connection = load_configuration(str(path))
    assert connection.authorization() == {"Authorization": "Bearer first"}
    token.write_text("second\n")
    clock[0] += credentials.TOKEN_REREAD_SECONDS - 1
    assert connection.authorization() == {"Authorization": "Bearer first"}  # not yet
    clock[0] += 2
    assert connection.authorization() == {"Authorization": "Bearer second"}
    token.write_text("third")
    connection.expire()  # the server answered 401: read it now
    assert connection.authorization() == {"Authorization": "Bearer third"}
    inline = kubeconfig(
        tmp_path / "inline",
        cluster={"server": "https://h"},
        user={"token": "abc", "tokenFile": "token"},
    )
    assert load_configuration(str(inline)).authorization() == {"Authorization": "Bearer abc"}


def test_the_service_account_in_a_pod(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "token").write_text("pod-token")
    (tmp_path / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    connection = service_account(tmp_path)
    assert connection.host == "https://[fd00::1]:6443"
    assert connection.ca_file == str(tmp_path / "ca.crt")
    assert connection.authorization() == {"Authorization": "Bearer pod-token"}
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(CredentialsError, match="KUBERNETES_SERVICE_HOST"):
        service_account(tmp_path)


def test_an_exec_plugin_goes_to_the_official_loader_and_runs(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        textwrap.dedent("""
        import json
        print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind":
                          "ExecCredential", "status": {"token": "from-exec"}}))
    """)
    )
    path = kubeconfig(
        tmp_path / "config",
        cluster={"server": "https://h"},
        user={
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": sys.executable,
                "args": [str(plugin)],
                "interactiveMode": "Never",
            }
        },
    )
    assert from_kubeconfig(path) is None  # more than Tickwork reads itself
    connection = load_configuration(str(path))
    assert connection.host == "https://h"
    assert connection.authorization() == {"Authorization": "Bearer from-exec"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("current-context: nowhere\ncontexts: []\n", "no context 'nowhere'"),
        (
            "current-context: a\ncontexts: [{name: a, context: {cluster: gone}}]\n",
            "no cluster 'gone'",
        ),
        ("[1, 2]", "not a mapping"),
        ("a: [", "cannot read the kubeconfig"),
    ],
)
def test_a_kubeconfig_that_cannot_be_used_says_why(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(CredentialsError, match=message):
        load_configuration(str(path))


def test_plain_http_needs_no_tls() -> None:
    assert Connection(host="http://127.0.0.1:8080").ssl_context() is False


def test_the_worker_never_imports_the_official_client_or_httpx_cli() -> None:
    probe = (
        "import sys, tickwork_worker.main, tickwork.kube.cache, tickwork.kube.client; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kubernetes', 'rich'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", "import json; " + probe], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(found) == []


def test_the_operator_logs_kopf_in_without_the_official_client(tmp_path: Path) -> None:
    """kopf's own login (login_via_client) imports the official client, and kopf imports
    its object models whenever the package is installed: ~10 MiB of the operator's RSS
    at start. The operator logs in with Tickwork's loader and hides the package from
    kopf's first import."""
    config = kubeconfig(
        tmp_path / "config",
        cluster={"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True},
        user={"token": "s3cret"},
    )
    probe = (
        "import json, logging, sys, tickwork_operator.main; "
        "from tickwork_operator.handlers import login; "
        "info = login(logger=logging.getLogger()); "
        "print(json.dumps([info.server, info.scheme, info.token, info.insecure, "
        "sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes')]))"
    )
    env = {**os.environ, "KUBECONFIG": str(config)}
    found = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, env=env
    ).stdout
    assert json.loads(found) == ["https://127.0.0.1:6443", "Bearer", "s3cret", True, []]


def test_kopf_gets_the_ca_and_the_client_certificate_of_a_connection(tmp_path: Path) -> None:
    from tickwork_operator.handlers import connection_info  # noqa: PLC0415 - imports kopf

    connection = Connection(
        host="https://10.0.0.1:443",
        ca_data="-----BEGIN CERTIFICATE-----\n",
        cert_file="/c.crt",
        key_file="/c.key",
    )
    info = connection_info(connection)
    assert (info.server, info.ca_data, info.insecure) == (
        "https://10.0.0.1:443",
        "-----BEGIN CERTIFICATE-----\n",
        False,
    )
    assert (info.certificate_path, info.private_key_path) == ("/c.crt", "/c.key")
    assert (info.scheme, info.token) == (None, None)
    token = tmp_path / "token"
    token.write_text("rotated-1\n")
    info = connection_info(Connection(host="https://h", ca_file="/ca.crt", token_file=str(token)))
    assert (info.ca_path, info.scheme, info.token) == ("/ca.crt", "Bearer", "rotated-1")
