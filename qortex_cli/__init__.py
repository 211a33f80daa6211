"""The ``qortex`` command line: thin over :mod:`qortex_core`, with ``commands/`` one module per
group of subcommands and ``runs/`` starting the Dagster project's jobs in this process.

Library commands never import Dagster; ``runs`` is imported only by the commands that run a job.
"""
