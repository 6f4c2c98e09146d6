"""The operator's kopf handlers, in one registry: kopf is the operator's framework for
its process (signals, start and clean-up, the login to the API server), through its
public API only.

The ScheduledJobs themselves are listed and watched by the operator's informer
(:mod:`tickwork_operator.feed`), not by kopf: no resource handler is registered, so
kopf watches nothing and writes nothing to the objects (no finalizers, no progress
annotations, no status).
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from tickwork.kube.credentials import Connection, load_configuration

registry = kopf.OperatorRegistry()


@kopf.on.login(registry=registry)
def login(**_: Any) -> kopf.ConnectionInfo:
    """Credentials as Tickwork's own loader finds them (the service account in a Pod,
    else KUBECONFIG), which imports the official client only for what it leaves to it
    (exec plugins, auth providers): kopf's ``login_via_client`` imports it always
    (with kopf's own import of its models, ~9 MiB of the operator's RSS). kopf calls
    this again when the API server refuses the credentials (a rotated token is read
    then, an exec plugin run again)."""
    return connection_info(load_configuration())


def connection_info(connection: Connection) -> kopf.ConnectionInfo:
    """What kopf needs of a :class:`Connection`."""
    scheme, _, token = connection.authorization().get("Authorization", "").partition(" ")
    return kopf.ConnectionInfo(
        server=connection.host,
        ca_path=connection.ca_file,
        ca_data=connection.ca_data,
        insecure=not connection.verify,
        scheme=scheme or None,
        token=token or None,
        certificate_path=connection.cert_file,
        private_key_path=connection.key_file,
    )


@kopf.on.cleanup(registry=registry)
async def stopping(memo: kopf.Memo, **_: Any) -> None:
    """kopf is stopping (SIGTERM): stop Tickwork's own loops now, not after kopf.

    After its own tasks, kopf waits up to 5 s for every task started after it — the
    ticker's and the reporter's waits among them, which end only on this event — and
    then cancels them: every shutdown took 5 s more, and a leader held its Lease that
    much longer before handing over."""
    stop: asyncio.Event | None = memo.get("stop")
    if stop is not None:
        stop.set()


def kopf_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True  # leadership is ours (a Lease), not kopf's peering
    settings.posting.enabled = False  # Events are posted by Tickwork, deduplicated
    settings.scanning.disabled = True  # no watching of CRDs and namespaces: less RBAC
    settings.process.ultimate_exiting_timeout = 60
    return settings
