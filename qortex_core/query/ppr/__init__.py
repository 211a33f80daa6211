"""Personalized PageRank: the solvers and their compiled kernels.

:mod:`.solve` is the entry (:class:`~.solve.PPRConfig`, :func:`~.solve.personalized_pagerank`,
:func:`~.solve.fast_walk`); :mod:`.cg` the conjugate-gradient solve on the symmetric walk with
its certified L1 bound, :mod:`.fused` the same iterates in fewer passes (numba), :mod:`.push`
local push for few seeds, :mod:`.kernels` the compiled passes, :mod:`.csr_views` views of the
adjacency split into row blocks.

Imports nothing from ``qortex_core.query`` outside this package.
"""
