"""Text analysis shared by core (lexical search) and ai (keyword evidence): one Korean
morphological analyser (kiwipiepy, whose model ships as a package) behind small functions.

Shared kernel: imports nothing of ``pinlog.core`` or ``pinlog.ai``.

- :func:`normalize` is the one normalisation for text entering the system (note text, place
  names, queries).
- :func:`analyse` returns morphemes with their part-of-speech tag and lemma.
- :func:`content_terms` returns the lemmas that carry meaning (nouns, verb/adjective stems,
  roots, foreign words, numbers), lower-cased: the unit of lexical search.
- :func:`evidence_terms` returns the same lemmas in order, plus counters/determiners
  (``한 잔``, ``한 바퀴``) and with ``…하다`` adjectives reduced to their root (``조용하다`` →
  ``조용``): the sequence that keyword cues are matched against.

The analyser loads lazily on first use (~3–5 s, ~150 MB resident) and is shared by the process;
analysing a short note takes ~2 ms.
"""

from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["Morph", "analyse", "content_terms", "evidence_terms", "normalize", "warm_up"]


def normalize(text: str) -> str:
    """Unicode NFC form of ``text`` (composed Hangul syllables).

    The one normalisation for note text, place names and queries (see README, "Text
    normalisation"); the text hash is taken of the normalised text.
    """
    return unicodedata.normalize("NFC", text)


@dataclass(frozen=True, slots=True)
class Morph:
    """One morpheme: ``form`` as written, ``tag`` (Sejong tag set, e.g. ``NNG``, ``VV``, ``SL``),
    ``lemma`` (dictionary form: ``먹`` + ``VV`` → ``먹다``), ``start``/``length`` in characters of
    the analysed text."""

    form: str
    tag: str
    lemma: str
    start: int
    length: int


_lock = threading.Lock()
_kiwi: Any = None


def _analyser() -> Any:
    global _kiwi
    if _kiwi is None:
        with _lock:
            if _kiwi is None:
                from kiwipiepy import Kiwi

                _kiwi = Kiwi()
    return _kiwi


def warm_up() -> None:
    """Load the analyser now (start-up) instead of on the first request."""
    _analyser()


def analyse(text: str) -> list[Morph]:
    """Morphemes of ``text`` (normalised first), in order. Raises nothing for any ``str``."""
    text = normalize(text)
    if not text.strip():
        return []
    out: list[Morph] = []
    for tok in _analyser().tokenize(text):
        lemma = getattr(tok, "lemma", None) or tok.form
        out.append(Morph(tok.form, tok.tag, lemma, tok.start, tok.len))
    return out


#: Tags whose lemma carries meaning: nouns, verb/adjective stems, roots, foreign words,
#: Chinese characters, numbers, adverbs.
CONTENT_TAGS = frozenset({"NNG", "NNP", "NR", "VV", "VA", "XR", "SL", "SH", "SN", "MAG"})


@lru_cache(maxsize=4096)
def _content_terms_cached(text: str) -> tuple[str, ...]:
    return tuple(m.lemma.lower().replace(" ", "") for m in analyse(text) if m.tag.split("-")[0] in CONTENT_TAGS)


def content_terms(text: str) -> list[str]:
    """Lower-cased lemmas of the content morphemes of ``text`` (``"부트캠프 친구들과 먹었던"`` →
    ``["부트캠프", "친구", "먹다"]``), spaces inside a lemma removed. Cached per text."""
    return list(_content_terms_cached(text))


#: content tags plus dependent nouns (잔, 바퀴, 명) and determiners (한, 두): keyword cues such as
#: "한 바퀴" or "한잔" are sequences of these.
EVIDENCE_TAGS = CONTENT_TAGS | {"NNB", "MM"}


@lru_cache(maxsize=8192)
def evidence_terms(text: str) -> tuple[str, ...]:
    """Lemmas of ``text`` for keyword evidence, in text order (SPEC §8, ``similarity`` judge).

    Like :func:`content_terms` (lower-cased lemmas, spaces removed) but keeps dependent nouns
    and determiners (``"커피 한잔"`` → ``("커피", "한", "잔")``) and reduces a ``…하다`` lemma of
    four or more characters to its root, so that ``조용했다`` and ``조용하고`` (analysed as
    ``조용하다`` or ``조용`` + ``하``) give the same term ``조용``. Applied to note texts and to
    cue strings alike. Cached per text; raises nothing for any ``str``.
    """
    out: list[str] = []
    for m in analyse(text):
        if m.tag.split("-")[0] not in EVIDENCE_TAGS:
            continue
        lemma = m.lemma.lower().replace(" ", "")
        if lemma.endswith("하다") and len(lemma) >= 4:
            lemma = lemma[:-2]
        if lemma:
            out.append(lemma)
    return tuple(out)
