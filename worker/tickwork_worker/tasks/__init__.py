"""Task kinds: how a run's ``spec.task`` is executed. One module per kind."""
