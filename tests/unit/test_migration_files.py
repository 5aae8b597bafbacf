"""Migration files sort in chain order and say what they do; the revision ids that deployed
databases store never change (issue 22 #5; docs/ARCHITECTURE.md "Migrations"). No database:
the chain is read from the scripts."""

from __future__ import annotations

import re
from pathlib import Path

from pinlog.db import migrate

#: Revision ids as deployed databases store them in ``ai.alembic_version`` (or the legacy
#: ``public.alembic_version``), base → head at the time the files were renamed. They are kept
#: although they no longer match the file names: changing one would leave every database at
#: that revision unrecognised (``Can't locate revision``).
STORED_REVISION_IDS = ("0001", "0002_issue10_lexical", "0004_issue16_robustness",
                       "0003_issue11_presets", "0002_issue14_adopt", "0005_preset_categories")
FILE_NAME = re.compile(r"^(\d{4})_[a-z][a-z0-9_]*\.py$")


def _files_in_chain_order() -> list[Path]:
    return [migrate.revision_path(revision) for revision in migrate.revision_chain()]


def test_the_files_sort_in_chain_order_and_are_numbered_by_position():
    versions = Path(migrate.__file__).parent / "migrations" / "versions"
    on_disk = sorted(p.name for p in versions.glob("*.py") if not p.name.startswith("_"))
    assert on_disk == [p.name for p in _files_in_chain_order()]
    for position, name in enumerate(on_disk, start=1):
        found = FILE_NAME.match(name)
        assert found and int(found.group(1)) == position, name
    # what it does, not which issue asked for it
    assert not [n for n in on_disk if re.search(r"issue\d", n)]


def test_the_stored_revision_ids_are_still_the_chain_and_new_ones_are_the_file_stem():
    chain = migrate.revision_chain()
    assert tuple(chain[:len(STORED_REVISION_IDS)]) == STORED_REVISION_IDS
    for revision in chain[len(STORED_REVISION_IDS):]:
        assert revision == migrate.revision_path(revision).stem
    assert migrate.head() == chain[-1] and chain[0] == migrate.ADOPTION_BASE
