"""One module per group of ``qortex`` subcommands; each has ``register(sub)``."""
