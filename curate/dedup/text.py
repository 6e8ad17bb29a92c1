"""The text that is shingled, for MinHash, verification and representatives alike."""

import pandas as pd

from curate.backend import normalize_text
from curate.config import FuzzyConfig


def prepare_text(text: pd.Series, config: FuzzyConfig) -> pd.Series:
    """The text that is shingled: normalised when the config asks for it.

    Parameters
    ----------
    text : pandas.Series or cudf.Series of str
    config : FuzzyConfig
        Its ``lowercase``, ``collapse_whitespace``, ``strip_punctuation``, ``strip_format``,
        ``strip_accents`` and ``nfkc`` flags.

    Returns
    -------
    Series of str
        ``text`` itself when no flag is set, else :data:`curate.backend.normalize_text` of it (same
        index, nulls kept).

    Raises
    ------
    ValueError
        When normalising an object column that holds a value that is neither a string nor a null.
    """
    if not config.normalizes:
        return text
    return normalize_text(
        text,
        lowercase=config.lowercase,
        whitespace=config.collapse_whitespace,
        punctuation=config.strip_punctuation,
        format_chars=config.strip_format,
        accents=config.strip_accents,
        nfkc=config.nfkc,
    )
