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


@lru_cache(maxsize=65536)
def _variants(term: str) -> frozenset[str]:
    """Every cue lemma that :func:`term_matches` accepts for the note lemma ``term``: itself,
    its Hangul compound heads of two or more syllables, its English stems (≥ 4 letters, at
    most 3 letters cut). Cached per lemma (lemmas repeat across notes)."""
    out = {term}
    if len(term) > 2 and _HANGUL.match(term):
        out.update(term[i:] for i in range(1, len(term) - 1))
    elif len(term) > 4 and term.isascii() and term.isalpha():
        out.update(term[:n] for n in range(max(4, len(term) - 3), len(term)))
    return frozenset(out)


@lru_cache(maxsize=4096)
def _note_forms(note: tuple[str, ...]) -> tuple[tuple[frozenset[str], ...], dict[str, list[int]]]:
    """A note's lemma variants (:func:`_variants`, per position) and the positions of each form,
    computed once per note for every preset's cues (the candidate step and the judge look the
    same note up against up to all presets)."""
    variants = tuple(_variants(term) for term in note)
    index: dict[str, list[int]] = {}
    for position, forms in enumerate(variants):
        for form in forms:
            index.setdefault(form, []).append(position)
    return variants, index


@lru_cache(maxsize=64)
def _cue_index(cue_lists: tuple[tuple[str, ...], ...],
               ) -> dict[str, tuple[tuple[int, int, str, tuple[str, ...]], ...]]:
    """Several presets' cues by their first lemma: ``first lemma → ((list index, cue's position
    in its list, cue, its lemma sequence), …)``; cues with no lemma are left out (they match
    nothing). Cached per cue-list set (a snapshot's presets ask for the same one every note)."""
    out: dict[str, list[tuple[int, int, str, tuple[str, ...]]]] = {}
    for index, cues in enumerate(cue_lists):
        for ordinal, cue in enumerate(cues):
            terms = cue_terms(cue)
            if terms:
                out.setdefault(terms[0], []).append((index, ordinal, cue, terms))
    return {first: tuple(entries) for first, entries in out.items()}


def _hits_by_list(note: tuple[str, ...],
                  cue_lists: tuple[tuple[str, ...], ...]) -> list[tuple[CueHit, ...]]:
    """Each cue list's hits in one note's lemmas, before the longest-match rule, in cue order
    then note order. Only cues whose first lemma is one of the note's forms are tried."""
    variants, index = _note_forms(note)
    starts = _cue_index(cue_lists)
    found: dict[int, list[tuple[int, int, CueHit]]] = {}
    for first in index.keys() & starts.keys():
        for which, ordinal, cue, terms in starts[first]:
            size = len(terms)
            for i in index[first]:
                if i + size > len(note) or not all(terms[k] in variants[i + k]
                                                   for k in range(1, size)):
                    continue
                if FACILITY_TERMS.intersection(note[max(0, i - 2):i]):
                    continue
                found.setdefault(which, []).append((ordinal, i, CueHit(cue, i, i + size)))
    out: list[tuple[CueHit, ...]] = [()] * len(cue_lists)
    for which, hits in found.items():
        hits.sort(key=lambda item: (item[0], item[1]))
        out[which] = tuple(hit for _, _, hit in hits)
    return out


@lru_cache(maxsize=4096)
def _note_memo(note: tuple[str, ...]) -> dict[tuple[str, ...], tuple[CueHit, ...]]:
    """A note's hits per cue list found so far (the candidate step asks for every preset's, the
    judge then for its candidates' — already known)."""
    return {}


def _preset_hits(note: tuple[str, ...],
                 cue_lists: Sequence[tuple[str, ...]]) -> list[tuple[CueHit, ...]]:
    """The hits of each cue list in ``note`` (:func:`_hits_by_list`), each list computed once
    per note."""
    memo = _note_memo(note)
    missing = tuple(sorted({cues for cues in cue_lists if cues not in memo}))
    if missing:
        memo.update(zip(missing, _hits_by_list(note, missing), strict=True))
    return [memo[cues] for cues in cue_lists]


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
    found = [(index, hit) for index, hits in enumerate(
        _preset_hits(note, [tuple(cues) for cues in cue_lists])) for hit in hits]
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
