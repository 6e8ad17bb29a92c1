"""``python -m curate`` runs the ``curate`` command."""

from curate.cli import main

main()
