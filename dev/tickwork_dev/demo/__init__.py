"""The local demo (``make demo``) and the single-process mode (watcher and worker in one
process over an in-memory queue: the prototype's shape)."""
