"""The Kubernetes edge shared by the operator and the worker: the client, status writes
(all of them, in :mod:`.status`) and Events."""
