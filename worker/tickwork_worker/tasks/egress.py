"""Where ``http`` tasks may connect: no request forgery by default.

A tenant who may create ScheduledJobs must not reach, through the workers, what
only the cluster can reach: loopback, link-local (cloud metadata at
169.254.169.254 and fd00:ec2::254), private ranges (the API server, Redis, Pods
and Services in nearly every cluster), and other special addresses. Each
connection is checked after DNS resolution and made to the very address that was
checked, so a name that resolves to something else a moment later (DNS
rebinding) gains nothing; redirects are not followed at all.

The installer widens or narrows this with ``allow`` and ``deny`` lists of CIDRs
and host patterns (``*.svc.cluster.local``, ``hooks.example.com``). A destination
is refused when its address is in a denied range (the defaults plus ``deny``) or
its host matches a denied pattern, unless the address is in an allowed range or
the host matches an allowed pattern. An allowed *host pattern* opens the private
ranges only: a name in it that resolves to loopback, link-local (cloud metadata)
or a range the installer denied is still refused, since a tenant may control
what a name resolves to (an ExternalName Service in their namespace, say). Only
an allowed CIDR opens those.

A refusal names the host and, for a name, not the addresses it resolved to: a
tenant learns nothing of the cluster's internal addresses from an error.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore
import httpx

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: This host, link-local (cloud metadata), multicast and reserved ranges, and the NAT64
#: prefixes that lead back to any address: never reached through a host name.
_NEVER_BY_NAME: tuple[str, ...] = (
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "fe80::/10",
    "ff00::/8",
)

#: Refused unless allowed: every range that is not the public internet.
DEFAULT_DENY: tuple[str, ...] = (
    *_NEVER_BY_NAME,
    "10.0.0.0/8",
    "100.64.0.0/10",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "100::/64",
    "2001:db8::/32",
    "fc00::/7",
)

#: Refused even for a host an allowed pattern matches (only an allowed CIDR opens them).
BELOW_PATTERNS: tuple[str, ...] = (*_NEVER_BY_NAME, "fd00:ec2::254/128")

_HOST_PATTERN = re.compile(r"[A-Za-z0-9*?._-]+")
_LOOKS_NUMERIC = re.compile(r"[0-9.]+")


class EgressRefusedError(Exception):
    """The destination is not allowed; the message says which address and why."""


def _split(entries: Iterable[str]) -> tuple[tuple[Network, ...], tuple[str, ...]]:
    networks: list[Network] = []
    patterns: list[str] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        if _HOST_PATTERN.fullmatch(entry) and not _LOOKS_NUMERIC.fullmatch(entry):
            patterns.append(entry.lower().rstrip("."))
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is neither a CIDR nor a host pattern") from None
    return tuple(networks), tuple(patterns)


@dataclass(frozen=True)
class EgressPolicy:
    deny_networks: tuple[Network, ...]
    deny_hosts: tuple[str, ...]
    allow_networks: tuple[Network, ...]
    allow_hosts: tuple[str, ...]
    pattern_floor: tuple[Network, ...] = ()
    """Refused even where an allowed host pattern matches (see BELOW_PATTERNS)."""

    @classmethod
    def build(cls, *, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> EgressPolicy:
        """The defaults, plus the installer's ``deny`` and ``allow`` (CIDRs or host
        patterns). Raises ValueError for an entry that is neither."""
        deny_networks, deny_hosts = _split([*DEFAULT_DENY, *deny])
        allow_networks, allow_hosts = _split(allow)
        floor, _ = _split([*BELOW_PATTERNS, *deny])
        return cls(deny_networks, deny_hosts, allow_networks, allow_hosts, floor)

    def refusal(self, host: str, address: Address) -> str | None:
        """Why ``host`` at ``address`` may not be reached, or None if it may."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
        name = host.lower().rstrip(".")
        if any(address in net for net in self.allow_networks if net.version == address.version):
            return None
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in self.allow_hosts):
            below = next(
                (
                    net
                    for net in self.pattern_floor
                    if net.version == address.version and address in net
                ),
                None,
            )
            return None if below is None else f"{address} is in {below}"
        for net in self.deny_networks:
            if net.version == address.version and address in net:
                return f"{address} is in {net}"
        for pattern in self.deny_hosts:
            if fnmatch.fnmatchcase(name, pattern):
                return f"{host} matches {pattern}"
        return None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, resolving names itself and connecting only to
    addresses the policy allows (every new connection, including after a retry)."""

    def __init__(self, policy: EgressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
        allowed = [a for a in addresses if self._policy.refusal(host, a) is None]
        if not allowed:
            raise EgressRefusedError(
                f"address not allowed: {_why(host, addresses, self._policy)}; the installer "
                "can allow it (chart value worker.egress.allow, or for one namespace "
                "worker.tenants)"
            )
        failure: Exception | None = None
        for address in allowed:  # the checked address itself: no second lookup
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # noqa: S101 - at least one address was tried
        raise failure

    async def connect_unix_socket(
        self,
        path: str,  # noqa: ARG002
        timeout: float | None = None,  # noqa: ARG002, ASYNC109
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,  # noqa: ARG002
    ) -> httpcore.AsyncNetworkStream:
        raise EgressRefusedError("address not allowed: unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _why(host: str, addresses: list[Address], policy: EgressPolicy) -> str:
    """Why ``host`` is refused, naming no address that a name resolved to."""
    reasons = list(dict.fromkeys(filter(None, (policy.refusal(host, a) for a in addresses))))
    if not _is_address(host):
        reasons = [reason for reason in reasons if reason.startswith(f"{host} matches ")]
    if reasons:
        return f"{host} ({'; '.join(reasons)})"
    return f"{host} (it resolves only to addresses that are not public, or that are denied)"


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def guarded_client(policy: EgressPolicy) -> httpx.AsyncClient:
    """An HTTP client for tasks: every connection checked by ``policy``; no proxies
    from the environment (a proxy would connect on the tasks' behalf, unchecked)."""
    transport = httpx.AsyncHTTPTransport(retries=0)
    transport._pool = httpcore.AsyncConnectionPool(  # noqa: SLF001 - the one way to pass a backend
        ssl_context=httpx.create_ssl_context(),
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        network_backend=GuardedBackend(policy),
    )
    return httpx.AsyncClient(transport=transport, trust_env=False)
