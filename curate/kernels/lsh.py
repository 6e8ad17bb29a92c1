"""LSH banding: one 64-bit bucket id per (document, band).

The bucket id of band ``k`` is the first 64 bits of MurmurHash3_x64_128, with seed ``k``, of
the little-endian bytes of the band's ``rows_per_band`` signature values. Seeding with the
band index keeps equal values in different bands in different buckets.

References
----------
.. [1] J. Leskovec, A. Rajaraman, J. Ullman, "Mining of Massive Datasets", ch. 3.4.
"""

import numpy as np
from numba import njit

from curate.kernels.murmur import murmur3_64


@njit(nogil=True, cache=True)
def _band_buckets(sig_bytes, num_bands, band_bytes, out):
    for i in range(sig_bytes.shape[0]):
        row = sig_bytes[i]
        for k in range(num_bands):
            out[i, k] = murmur3_64(row, k * band_bytes, (k + 1) * band_bytes, k)


def band_buckets(signatures, num_bands, rows_per_band):
    """Bucket ids of every band of every signature.

    Parameters
    ----------
    signatures : array of shape (n_docs, num_perm), dtype uint32 or uint64
        ``num_perm >= num_bands * rows_per_band``; later columns are ignored.
    num_bands, rows_per_band : int

    Returns
    -------
    array of shape (n_docs, num_bands), dtype uint64

    Raises
    ------
    ValueError
        If the signatures are shorter than ``num_bands * rows_per_band``.
    """
    n_docs, num_perm = signatures.shape
    if num_bands * rows_per_band > num_perm:
        raise ValueError(
            f"{num_bands} bands x {rows_per_band} rows need {num_bands * rows_per_band} hashes, have {num_perm}"
        )
    sig_bytes = np.ascontiguousarray(signatures).view(np.uint8).reshape(n_docs, num_perm * signatures.itemsize)
    out = np.empty((n_docs, num_bands), dtype=np.uint64)
    _band_buckets(sig_bytes, num_bands, rows_per_band * signatures.itemsize, out)
    return out
