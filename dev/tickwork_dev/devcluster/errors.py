"""Errors of the local development cluster, each saying what to do next."""

from __future__ import annotations


class DevClusterError(Exception):
    """Base class: the local control plane or Redis could not be provided."""


class BuildError(DevClusterError):
    """The control-plane binaries could not be built from the Go module proxy."""


class StartError(DevClusterError):
    """A server process did not start or did not become ready in time."""
