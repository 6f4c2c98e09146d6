"""A real local Kubernetes control plane and Redis, for tests, the demo and benchmarks.

``build`` compiles kube-apiserver, kube-controller-manager, etcd and helm from
the Go module proxy (cached by version); ``certs`` makes the PKI;
``controlplane`` runs etcd + kube-apiserver (+ controller-manager);
``redis`` runs redis-server; ``__main__`` is the ``make controlplane`` CLI.
"""
