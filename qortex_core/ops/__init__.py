"""Operations: health checks of a data home (``qortex doctor``; the Dagster asset checks call the
same
functions).

The top layer (with ``serving``): may import everything in ``qortex_core``.
"""
