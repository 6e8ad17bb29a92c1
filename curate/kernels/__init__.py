"""Per-partition array kernels (numba): ``(offsets, bytes)`` string buffers in, arrays out.

Nothing here knows about Dask or DataFrames; nothing here imports the rest of curate.
"""
