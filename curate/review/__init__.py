"""Reading a finished run back for people: ``curate report`` and ``curate inspect``.

:mod:`curate.review.inspect` reads an output folder (summary, duplicate groups, texts from the
input files), :mod:`curate.review.diff` compares two texts word by word, and
:mod:`curate.review.report` writes the self-contained HTML report. Nothing here is needed to
deduplicate; the command line imports it only for those two commands.
"""
