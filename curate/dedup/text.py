"""The text that is shingled, for MinHash, verification and representatives alike."""

import pandas as pd

from curate.backend import normalize_text
from curate.config import FuzzyConfig


def prepare_text(text: pd.Series, config: FuzzyConfig) -> pd.Series:
    """The text that is shingled: normalised when the config asks for it."""
    if not config.normalizes:
        return text
    return normalize_text(
        text,
        lowercase=config.lowercase,
        whitespace=config.collapse_whitespace,
        punctuation=config.strip_punctuation,
        nfkc=config.nfkc,
    )
