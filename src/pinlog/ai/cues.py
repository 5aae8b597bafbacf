"""Cues: words or stems in a preset file that state the preset outright, and how a note is
matched against them (SPEC §8; lexical evidence of the ``similarity`` judge, lexical candidates).

Note and cue are both reduced to lemma sequences by Korean morphology
(:func:`pinlog.text.evidence_terms`: 먹었던 → 먹다, 조용했다 → 조용, "한잔" → 한 + 잔). A cue
matches a run of the note's lemmas; a Hangul noun cue of two or more syllables also matches as the
head of a compound (찌개 in 김치찌개, 기념일 in 결혼기념일); an English cue of four or more letters
also matches inflected forms (friend → friends). The longest match wins (여자친구 → WITH_PARTNER's
cue, not WITH_FRIENDS' 친구), and a cue right after a facility word (주차가 넓어서) describes the
facility, not the place, and does not count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from pinlog.text import evidence_terms

_HANGUL = re.compile(r"^[\uac00-\ud7a3]+$")


#: words naming a facility (parking, price, queue, toilet, staff, payment): a cue right after
#: one of them describes the facility ("주차가 넓어서"), not the place.
FACILITY_TERMS = frozenset({"주차", "주차장", "가격", "웨이팅", "화장실", "직원", "결제",
                            "parking", "price", "toilet", "staff"})


@lru_cache(maxsize=8192)
def cue_terms(cue: str) -> tuple[str, ...]:
    """A cue as the lemma sequence it must match (:func:`pinlog.text.evidence_terms`)."""
    return evidence_terms(cue)


def term_matches(note_term: str, cue_term: str) -> bool:
    """Whether one note lemma matches one cue lemma: equal; or a Hangul cue of two or more
    syllables that is the head (end) of a Hangul compound (찌개 ⊂ 김치찌개); or a Latin cue of
    four or more letters that starts the note word with at most three letters more
    (friend → friends, drink → drinking)."""
    if note_term == cue_term:
        return True
    if len(cue_term) >= 2 and _HANGUL.match(cue_term) and _HANGUL.match(note_term):
        return note_term.endswith(cue_term)
    if len(cue_term) >= 4 and cue_term.isascii() and cue_term.isalpha():
        return note_term.startswith(cue_term) and len(note_term) - len(cue_term) <= 3
    return False


@dataclass(frozen=True)
class CueHit:
    """One cue found in a note: the cue as written in the preset file and the span of note
    lemmas it covers (``start`` inclusive, ``end`` exclusive)."""

    cue: str
    start: int
    end: int


def _variants(term: str) -> frozenset[str]:
    """Every cue lemma that :func:`term_matches` accepts for the note lemma ``term``: itself,
    its Hangul compound heads of two or more syllables, its English stems (≥ 4 letters, at
    most 3 letters cut)."""
    out = {term}
    if len(term) > 2 and _HANGUL.match(term):
        out.update(term[i:] for i in range(1, len(term) - 1))
    elif len(term) > 4 and term.isascii() and term.isalpha():
        out.update(term[:n] for n in range(max(4, len(term) - 3), len(term)))
    return frozenset(out)


def _find(note: tuple[str, ...], cue: tuple[str, ...],
          index: dict[str, list[int]], variants: list[frozenset[str]]) -> list[tuple[int, int]]:
    size = len(cue)
    if not size or size > len(note):
        return []
    return [(i, i + size) for i in index.get(cue[0], ())
            if i + size <= len(note) and all(cue[k] in variants[i + k] for k in range(1, size))]


@lru_cache(maxsize=16384)
def _preset_hits(note: tuple[str, ...], cues: tuple[str, ...]) -> tuple[CueHit, ...]:
    """Hits of one preset's cues in one note's lemmas, before the longest-match rule; cached
    (the candidate step and the judge ask for the same note and presets)."""
    variants = [_variants(term) for term in note]
    index: dict[str, list[int]] = {}
    for position, forms in enumerate(variants):
        for form in forms:
            index.setdefault(form, []).append(position)
    found = []
    for cue in cues:
        for start, end in _find(note, cue_terms(cue), index, variants):
            if FACILITY_TERMS.intersection(note[max(0, start - 2):start]):
                continue
            found.append(CueHit(cue, start, end))
    return tuple(found)


def cue_hits(text: str, cue_lists: Sequence[Sequence[str]]) -> list[list[CueHit]]:
    """The cues of each preset that ``text`` states (same order as ``cue_lists``).

    Rules (module docstring): lemma-run match, compound heads, English inflections; a hit
    whose span lies strictly inside another preset's longer hit is dropped (longest match
    wins); one preset's cues on the same words count once (the longest, the first of equals,
    in cue-list order); a hit right after a facility word (:data:`FACILITY_TERMS`, within the two previous
    lemmas) is dropped. Pure and deterministic.
    """
    if not any(cue_lists):  # no preset has cues: no morphology needed
        return [[] for _ in cue_lists]
    note = evidence_terms(text)
    if not note:
        return [[] for _ in cue_lists]
    found = [(index, hit) for index, cues in enumerate(cue_lists)
             for hit in _preset_hits(note, tuple(cues))]
    out: list[list[CueHit]] = [[] for _ in cue_lists]
    for position, (index, hit) in enumerate(found):
        size = hit.end - hit.start
        covered = False
        for k, (other, o) in enumerate(found):
            inside = o.start <= hit.start and hit.end <= o.end
            if not inside or k == position:
                continue
            longer = (o.end - o.start) > size
            # another preset's longer cue on these words wins (longest match); one preset's
            # cues on the same words count once (비 오다 inside 비 오는 날; 친구 and 친구들 on
            # the same lemma): the longest, the first of equals
            if (other != index and longer) or (other == index and (longer or k < position)):
                covered = True
                break
        if not covered:
            out[index].append(hit)
    return out
