"""The variant table of the lexical channel (SPEC §10; issue 28): other spellings, other words
and other languages for the things people save places for.

The table is ``variants.yaml`` next to this module (its header says how to write an entry):
*concepts*, each with its *forms* (돈카츠, 돈까스, 돈가스, tonkatsu, とんかつ …), optionally
*narrower* concepts (a query "술집" also finds a note about an 이자카야) and *parts* (the compound
"피맥" is pizza + beer), and the *generic* words that never count as evidence ("곳", "place").

:meth:`VariantTable.find` returns the concepts a query names, each with the query terms it
covers and the term sets (:func:`pinlog.text.lexical_terms` of every form of the concept, of its
narrower concepts and of the compounds it is a part of) any one of which, found among a
record's terms, means the record names it too. Forms are compared case-folded with spaces
removed (``"Pork Cutlet"`` = ``"porkcutlet"``), a trailing English plural ``s`` dropped; a form
of two or more Hangul syllables is also found by its **sound key** (:func:`sound_key`: plain,
tense and aspirated consonants, ㅐ/ㅔ and the sounds a final consonant neutralises to counted
as one), so spellings the table does not list — 돈까쓰, 떡뽀끼 — still find their concept. A form
is found inside a longer Hangul or CJK word (라멘집 → 라멘; a form of two characters or more);
a one-character form only as a whole word. Shared kernel: imports nothing of ``pinlog.core``
or ``pinlog.ai``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from pinlog.errors import PinlogError
from pinlog.text import lexical_terms, lexical_words, normalize

__all__ = ["Concept", "Found", "VariantTable", "VariantTableError", "default_table", "sound_key",
           "words"]

_FORM = Annotated[StrictStr, Field(min_length=1, max_length=60)]


class VariantTableError(PinlogError, ValueError):
    """The variant table is invalid (one line per problem)."""


class _ConceptEntry(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    forms: Annotated[list[_FORM], Field(min_length=1)]
    narrower: list[StrictStr] = []
    parts: list[StrictStr] = []


class _Document(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    concepts: dict[StrictStr, list[_FORM] | _ConceptEntry]
    generic: list[_FORM] = []

    @field_validator("concepts")
    @classmethod
    def _known_references(cls, concepts: dict[str, Any]) -> dict[str, Any]:
        for cid, entry in concepts.items():
            if isinstance(entry, _ConceptEntry):
                for ref in (*entry.narrower, *entry.parts):
                    if ref not in concepts:
                        raise ValueError(f"concept {cid} names an unknown concept {ref!r}")
        return concepts


@dataclass(frozen=True)
class Concept:
    """One concept: its id, forms (as written), narrower concepts and parts (ids)."""

    id: str
    forms: tuple[str, ...]
    narrower: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Found:
    """A concept a query names.

    Attributes:
        concept: its id.
        covers: the query's lexical terms the naming word or phrase accounts for.
        any_of: term sets; a record whose terms include every term of one of them names the
            concept (its forms, its narrower concepts' forms, the compounds it is part of).
        all_of: for a compound: per part, that part's ``any_of``; a record naming every part
            names the compound too.
    """

    concept: str
    covers: frozenset[str]
    any_of: tuple[frozenset[str], ...]
    all_of: tuple[tuple[frozenset[str], ...], ...] = ()

    def named_by(self, terms: frozenset[str] | set[str]) -> bool:
        """Whether a record with these lexical ``terms`` names the concept."""
        if any(alt <= terms for alt in self.any_of):
            return True
        return bool(self.all_of) and all(any(alt <= terms for alt in part) for part in self.all_of)


# --- sound key -----------------------------------------------------------------------------------
_SYLLABLES = 0xAC00
#: lead consonant index → its plain consonant (ㄲ→ㄱ ㄸ→ㄷ ㅃ→ㅂ ㅆ→ㅅ ㅉ→ㅈ). Aspirated ones stay
#: apart: merging them too made 피자 (pizza) sound like 비싸 (pricey).
_LEAD = {1: 0, 4: 3, 8: 7, 10: 9, 13: 12}
#: vowel index → its class (ㅐ→ㅔ  ㅒ→ㅖ  ㅙ,ㅞ→ㅚ)
_VOWEL = {1: 5, 3: 7, 10: 11, 15: 11}
#: final consonant index → the sound it neutralises to (the seven final sounds)
_TAIL = {2: 1, 3: 1, 9: 1, 24: 1, 5: 4, 6: 4, 19: 7, 20: 7, 22: 7, 23: 7, 25: 7, 27: 7,
         11: 8, 12: 8, 13: 8, 15: 8, 10: 16, 14: 17, 18: 17, 26: 17}


def sound_key(text: str) -> str:
    """``text`` with every Hangul syllable replaced by the syllable of its sound class: a tense
    lead consonant as its plain one (ㄲ→ㄱ, ㄸ→ㄷ, ㅃ→ㅂ, ㅆ→ㅅ, ㅉ→ㅈ), ㅐ/ㅔ, ㅒ/ㅖ, ㅙ/ㅚ/ㅞ as
    one, a final consonant as the sound it neutralises to (ㄲㅋ→ㄱ, ㅅㅆㅈㅊㅌㅎ→ㄷ, ㅍ→ㅂ …).
    ``돈까스`` and ``돈가스``, ``떡뽁이`` and ``떡볶이``, ``케잌`` and ``케익`` have the same key;
    other characters are kept."""
    out = []
    for ch in text:
        offset = ord(ch) - _SYLLABLES
        if not 0 <= offset < 11172:
            out.append(ch)
            continue
        lead, vowel, tail = offset // 588, offset % 588 // 28, offset % 28
        out.append(chr(_SYLLABLES + (_LEAD.get(lead, lead) * 21 + _VOWEL.get(vowel, vowel)) * 28
                       + _TAIL.get(tail, tail)))
    return "".join(out)


_HANGUL = re.compile("^[\uac00-\ud7a3]+$")
#: Scripts written without spaces between words: a form is looked for inside their words.
_UNSPACED = re.compile("[\uac00-\ud7a3\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


def words(text: str) -> list[tuple[str, int, int]]:
    """The words of ``text`` as the lexical channel splits it (:func:`pinlog.text.lexical_words`:
    runs of one script, case-folded) with their offsets in ``normalize(text).casefold()``."""
    return lexical_words(text)


def _key(form: str) -> str:
    """The lookup key of a form or a query span: its words case-folded and joined, a trailing
    English plural ``s`` of a word longer than three letters dropped."""
    joined = "".join(w for w, _, _ in words(form))
    if joined.isascii() and len(joined) > 3 and joined.endswith("s") and not joined.endswith("ss"):
        joined = joined[:-1]
    return joined


class VariantTable:
    """The concepts of a variant table, indexed for lookup (module docstring).

    Args:
        concepts: the concepts (ids unique; every narrower/part id among them).
        generic: words that are never evidence (compared as :func:`_key`).
        sound: also find a form by its :func:`sound_key` (False: exact forms only; for
            measuring the two against each other, ``bench/calibrate_search.py --variants``).
    """

    #: Most words of a phrase form (``"black bean noodles"``).
    MAX_PHRASE_WORDS = 4

    def __init__(self, concepts: list[Concept], generic: tuple[str, ...] = (), *,
                 sound: bool = True) -> None:
        self.concepts = {c.id: c for c in concepts}
        self.sound = sound
        self.generic = frozenset(_key(g) for g in generic) | frozenset(g.casefold() for g in generic)
        self._exact: dict[str, set[str]] = {}
        self._sound: dict[str, set[str]] = {}
        self._containing: dict[str, set[str]] = {}
        for c in concepts:
            for form in c.forms:
                key = _key(form)
                if not key:
                    continue
                self._exact.setdefault(key, set()).add(c.id)
                if len(key) >= 2 and _HANGUL.match(key):
                    self._sound.setdefault(sound_key(key), set()).add(c.id)
            for part in c.parts:
                self._containing.setdefault(part, set()).add(c.id)
        self._longest = max((len(k) for k in self._exact), default=0)

    # --- what a record must contain --------------------------------------------------------
    @lru_cache(maxsize=2048)  # noqa: B019 - the table lives as long as the process
    def alternatives(self, concept: str) -> tuple[frozenset[str], ...]:
        """Term sets of every form of ``concept``, of its narrower concepts (transitively) and
        of the compounds any of those is a part of, each once — without those that include
        another one (a record with the larger set has the smaller too) — round-robin over those
        concepts in table order (each one's first form, then each one's second …)."""
        owners = list(dict.fromkeys(owner for cid in self._closure(concept)
                                    for owner in (cid, *sorted(self._containing.get(cid, ())))))
        per_owner = [[frozenset(lexical_terms(f)) for f in _by_script(self.concepts[o].forms)]
                     for o in owners]
        everything = {alt for forms in per_owner for alt in forms if alt}
        # a record with a longer form has every term of a shorter one it contains (회전초밥 ⊇
        # 초밥): only the minimal term sets are needed; and they are taken round-robin — every
        # concept's first form, then every concept's second …, each concept's forms alternating
        # between scripts — so that when a search keeps only its first alternatives
        # (MAX_SEARCH_TERMS) each concept keeps its main forms in each language
        minimal = [[alt for alt in forms if alt and not any(o < alt for o in everything)]
                   for forms in per_owner]
        seen: dict[frozenset[str], None] = {}
        for rank in range(max((len(m) for m in minimal), default=0)):
            for forms in minimal:
                if rank < len(forms):
                    seen.setdefault(forms[rank])
        return tuple(seen)

    def _closure(self, concept: str) -> list[str]:
        out, stack = [concept], [concept]
        while stack:
            for narrower in self.concepts[stack.pop()].narrower:
                if narrower not in out:
                    out.append(narrower)
                    stack.append(narrower)
        return out

    def _found(self, concept: str, covers: frozenset[str]) -> Found:
        parts = self.concepts[concept].parts
        return Found(concept, covers, self.alternatives(concept),
                     tuple(self.alternatives(p) for p in parts))

    # --- what a query names ----------------------------------------------------------------
    def is_generic(self, word: str) -> bool:
        """Whether a query word (or lemma) is one of the table's generic words."""
        return word.casefold() in self.generic or _key(word) in self.generic

    def lookup(self, span: str) -> set[str]:
        """Concept ids whose form is ``span`` (a word or words), exactly or by sound key."""
        key = _key(span)
        if not key or key in self.generic:
            return set()
        found = set(self._exact.get(key, ()))
        if self.sound and len(key) >= 2 and _HANGUL.match(key):
            found |= self._sound.get(sound_key(key), set())
        return found

    def find(self, query: str) -> list[Found]:
        """The concepts ``query`` names (module docstring), each once, in query order; its
        :attr:`Found.covers` holds the query terms of every span that names it."""
        ws = words(query)
        text = normalize(query).casefold()
        covers: dict[str, set[str]] = {}
        for i in range(len(ws)):
            for j in range(min(len(ws), i + self.MAX_PHRASE_WORDS), i, -1):
                span = text[ws[i][1]:ws[j - 1][2]]
                for cid in sorted(self.lookup(span)):
                    covers.setdefault(cid, set()).update(lexical_terms(span))
        for word, start, _end in ws:
            if not _UNSPACED.match(word) or len(word) < 3:
                continue
            for a in range(len(word)):
                for b in range(min(len(word), a + self._longest), a + 1, -1):
                    if b - a == len(word):
                        continue  # the whole word: looked up above
                    sub = text[start + a:start + b]
                    for cid in sorted(self.lookup(sub)):
                        covers.setdefault(cid, set()).update(lexical_terms(sub))
        return [self._found(cid, frozenset(terms)) for cid, terms in covers.items()]


def _script(form: str) -> int:
    """0 Hangul, 1 Latin, 2 anything else (kana, Han …) — by the form's first letter."""
    for ch in form:
        if "\uac00" <= ch <= "\ud7a3":
            return 0
        if ch.isascii() and ch.isalpha() or "\u00c0" <= ch <= "\u024f":
            return 1
        if ch.isalpha():
            return 2
    return 2


def _by_script(forms: tuple[str, ...]) -> list[str]:
    """``forms`` alternating between scripts (the first Korean, the first Latin, the first other
    form, the second Korean …), each script's forms in table order."""
    groups: list[list[str]] = [[], [], []]
    for form in forms:
        groups[_script(form)].append(form)
    out = []
    for rank in range(max(len(g) for g in groups)):
        out += [g[rank] for g in groups if rank < len(g)]
    return out


def parse(document: Any, source: str, *, sound: bool = True) -> VariantTable:
    """A :class:`VariantTable` from a parsed YAML document.

    Raises:
        VariantTableError: a wrong shape or an unknown concept reference (one line each).
    """
    try:
        doc = _Document.model_validate(document)
    except ValidationError as exc:
        lines = [f"{source}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise VariantTableError("\n".join(lines)) from None
    concepts = []
    for cid, entry in doc.concepts.items():
        if isinstance(entry, list):
            concepts.append(Concept(cid, tuple(entry)))
        else:
            concepts.append(Concept(cid, tuple(entry.forms), tuple(entry.narrower), tuple(entry.parts)))
    return VariantTable(concepts, tuple(doc.generic), sound=sound)


def load(path: Path) -> VariantTable:
    """Read a variant table file (``variants.yaml``'s format)."""
    return parse(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


@lru_cache(maxsize=2)
def default_table(*, sound: bool = True) -> VariantTable:
    """The packaged table (``pinlog/channels/variants.yaml``), read once per process."""
    text = resources.files("pinlog.channels").joinpath("variants.yaml").read_text(encoding="utf-8")
    return parse(yaml.safe_load(text), "variants.yaml", sound=sound)
