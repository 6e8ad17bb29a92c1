"""``python -m curate`` runs the ``curate`` command."""

from curate.cli import console

console()
