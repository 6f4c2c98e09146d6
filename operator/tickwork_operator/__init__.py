"""The watcher: a kopf operator that finds due runs in time buckets and publishes them.

The folder is ``operator/`` (the architecture's name), the import name is
``tickwork_operator`` so that nothing shadows the standard library's
``operator`` module.
"""
