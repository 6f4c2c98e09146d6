"""The pure core: schedule arithmetic, run IDs, the bucket index and the run state machine.

Nothing here performs I/O, reads a clock or the environment: time is an argument.
"""
