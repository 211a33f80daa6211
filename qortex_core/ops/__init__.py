"""Operations: health checks of a data home (``qortex doctor``; the Dagster asset checks call the
same
functions).

May import everything in ``qortex_core``.
"""
