"""``python -m pinlog`` = the ``pinlog`` command."""

from pinlog.cli import main

main()
