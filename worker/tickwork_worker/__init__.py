"""The executor: claims runs from the queue, executes them and writes their outcome.

The folder is ``worker/``; the import name is ``tickwork_worker``.
"""
