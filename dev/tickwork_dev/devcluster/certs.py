"""The PKI of a local control plane: a CA, the serving certificate, client certificates
and the service-account signing key, written as PEM files into one directory.

It also holds what a node needs (client certificates of the kubelet, the scheduler
and kube-proxy) and a separate front-proxy CA for aggregated APIs (the metrics
adapters the autoscaler reads), as kubeadm lays them out. EC keys are cheap, so
every control plane gets the whole set."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: The first address of the service range; the apiserver's in-cluster address.
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
_KUBERNETES_SERVICE_IP = "10.0.0.1"
_VALIDITY = dt.timedelta(days=365)
#: The one node of a local cluster.
NODE_NAME = "tickwork-node"
#: Name of the front-proxy client certificate, which aggregated API servers trust.
FRONT_PROXY_CLIENT = "front-proxy-client"
#: Identity of the NetworkPolicy agent; the node bootstrap grants it read access.
NETWORK_POLICY_AGENT = "tickwork:network-policy-agent"


@dataclass(frozen=True)
class ClientCert:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Paths of every PEM file the control plane needs."""

    ca_cert: Path
    ca_key: Path
    serving: ClientCert
    admin: ClientCert
    controller_manager: ClientCert
    service_account_key: Path
    service_account_pub: Path
    scheduler: ClientCert
    kube_proxy: ClientCert
    kubelet: ClientCert
    """The node's identity: ``system:node:<NODE_NAME>`` in ``system:nodes``."""
    apiserver_kubelet_client: ClientCert
    """What the API server presents to kubelets (logs, exec)."""
    network_policy_agent: ClientCert
    front_proxy_ca_cert: Path
    front_proxy_client: ClientCert
    """What the API server presents to aggregated API servers."""


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256 keys are fast to make and accepted by every Kubernetes component.
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _issue(
    *,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate | None,
    ca_key: ec.EllipticCurvePrivateKey,
    now: dt.datetime,
    server_names: list[str] | None = None,
    client: bool = False,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject if ca_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )
    if ca_cert is None:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        )
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        )
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names:
        alt: list[x509.GeneralName] = []
        for name in server_names:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alt.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _authority(
    directory: Path, stem: str, common_name: str, now: dt.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    cert = _issue(subject=_name(common_name), key=key, ca_cert=None, ca_key=key, now=now)
    _write_key(directory / f"{stem}.key", key)
    _write_cert(directory / f"{stem}.crt", cert)
    return cert, key


def generate_pki(
    directory: Path, *, now: dt.datetime | None = None, server_ips: tuple[str, ...] = ()
) -> Pki:
    """Create a fresh PKI in ``directory`` (created if missing) and return its paths.

    ``server_ips`` are extra addresses the API server is reached at (a node's
    address, where Pods reach it), added to its serving certificate.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = now or dt.datetime.now(dt.UTC)
    ca_cert, ca_key = _authority(directory, "ca", "tickwork-local-ca", now)
    proxy_ca_cert, proxy_ca_key = _authority(directory, "front-proxy-ca", "front-proxy-ca", now)

    def leaf(
        stem: str,
        subject: x509.Name,
        *,
        names: list[str] | None = None,
        client: bool = False,
        front_proxy: bool = False,
    ) -> ClientCert:
        key = _key()
        cert = _issue(
            subject=subject,
            key=key,
            ca_cert=proxy_ca_cert if front_proxy else ca_cert,
            ca_key=proxy_ca_key if front_proxy else ca_key,
            now=now,
            server_names=names,
            client=client,
        )
        _write_key(directory / f"{stem}.key", key)
        _write_cert(directory / f"{stem}.crt", cert)
        return ClientCert(cert=directory / f"{stem}.crt", key=directory / f"{stem}.key")

    serving = leaf(
        "apiserver",
        _name("kube-apiserver"),
        names=[
            "127.0.0.1",
            "localhost",
            _KUBERNETES_SERVICE_IP,
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            *server_ips,
        ],
    )
    # system:masters is the bootstrap superuser group; only the local admin gets it.
    admin = leaf("admin", _name("tickwork-admin", "system:masters"), client=True)
    # The controller-manager's own identity, bound by the bootstrap RBAC policy.
    kcm = leaf("controller-manager", _name("system:kube-controller-manager"), client=True)

    sa_key = _key()
    _write_key(directory / "sa.key", sa_key)
    (directory / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    # Identities the bootstrap RBAC policy binds (system:kube-scheduler,
    # system:node-proxier) or the Node authorizer recognises (system:nodes).
    return Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving=serving,
        admin=admin,
        controller_manager=kcm,
        service_account_key=directory / "sa.key",
        service_account_pub=directory / "sa.pub",
        scheduler=leaf("scheduler", _name("system:kube-scheduler"), client=True),
        kube_proxy=leaf("kube-proxy", _name("system:kube-proxy"), client=True),
        kubelet=leaf("kubelet", _name(f"system:node:{NODE_NAME}", "system:nodes"), client=True),
        apiserver_kubelet_client=leaf(
            "apiserver-kubelet-client",
            _name("kube-apiserver-kubelet-client", "system:masters"),
            client=True,
        ),
        network_policy_agent=leaf("network-policy-agent", _name(NETWORK_POLICY_AGENT), client=True),
        front_proxy_ca_cert=directory / "front-proxy-ca.crt",
        front_proxy_client=leaf(
            "front-proxy-client", _name(FRONT_PROXY_CLIENT), client=True, front_proxy=True
        ),
    )


@dataclass(frozen=True)
class ServerTls:
    """A throwaway CA and a server certificate it signed, as PEM files (for a TLS
    ``redis-server`` in tests)."""

    ca_cert: Path
    cert: Path
    key: Path


def generate_server_tls(
    directory: Path,
    *,
    names: tuple[str, ...] = ("127.0.0.1", "localhost"),
    now: dt.datetime | None = None,
) -> ServerTls:
    """A fresh CA in ``directory`` and a serving certificate for ``names`` (IPs or DNS names).

    Each call makes a new CA, so a second directory gives a CA that does not
    verify the first one's certificate.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = now or dt.datetime.now(dt.UTC)
    ca_cert, ca_key = _authority(directory, "ca", "tickwork-test-ca", now)
    key = _key()
    cert = _issue(
        subject=_name(names[0]),
        key=key,
        ca_cert=ca_cert,
        ca_key=ca_key,
        now=now,
        server_names=list(names),
    )
    _write_key(directory / "server.key", key)
    _write_cert(directory / "server.crt", cert)
    return ServerTls(
        ca_cert=directory / "ca.crt", cert=directory / "server.crt", key=directory / "server.key"
    )
