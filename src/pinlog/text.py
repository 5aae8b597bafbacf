"""Text analysis shared by core (lexical search) and ai (keyword evidence): one Korean
morphological analyser (kiwipiepy, whose model ships as a package) behind small functions.

Shared kernel: imports nothing of ``pinlog.core`` or ``pinlog.ai``.

- :func:`normalize` is the one normalisation for text entering the system (note text, place
  names, queries).
- :func:`analyse` returns morphemes with their part-of-speech tag and lemma.
- :func:`content_terms` returns the lemmas that carry meaning (nouns, verb/adjective stems,
  roots, foreign words, numbers), lower-cased: the unit of lexical evidence.
- :func:`lexical_terms` returns the terms of the search lexical channel (SPEC §10): character
  bigrams of Hangul/CJK runs and lower-cased Latin words/numbers. Chosen over kiwipiepy content
  terms by measurement (``bench/calibrate_search.py --tokenizers``): compound and unknown words
  (``마늘보쌈``, ``무침군만두``, ``저스트텐동``) are split unpredictably by the analyser, and a
  one-word query then misses the note that contains it.

The analyser loads lazily on first use (~3–5 s, ~150 MB resident) and is shared by the process;
analysing a short note takes ~2 ms.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["Morph", "analyse", "content_terms", "lexical_terms", "normalize", "warm_up"]


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


_CJK_CHARS = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
#: Runs of one script inside a word: Hangul syllables, other CJK (Han, kana), Hangul jamo
#: (``ㅋㅋ``, dropped), or any other letters/digits (Latin, numbers, …).
_RUNS = re.compile(r"[\uac00-\ud7a3]+|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+"
                   r"|[\u1100-\u11ff\u3130-\u318f]+|(?:(?![" + _CJK_CHARS + r"])[^\W_])+")
_BIGRAM_SCRIPT = re.compile(r"[\uac00-\ud7a3\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_JAMO = re.compile(r"[\u1100-\u11ff\u3130-\u318f]")
#: Longest term kept (characters); a longer Latin "word" is cut (tsvector lexemes are bounded).
MAX_TERM_CHARS = 64
#: English function words that would otherwise match almost every English note.
ENGLISH_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "had", "has", "have",
    "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "so", "that", "the",
    "their", "there", "this", "to", "was", "we", "were", "where", "which", "with", "you", "your",
})


def lexical_terms(text: str) -> list[str]:
    """Distinct terms of ``text`` for the lexical search channel (SPEC §10), in first-seen order.

    ``text`` is normalised (NFC) and case-folded, then split into runs of one script:

    - Hangul (and other CJK) runs → overlapping character bigrams (``"피넛커피"`` → ``피넛``,
      ``넛커``, ``커피``); a one-character run is kept whole (``"책"``). Particles stay attached
      to the word they follow, so a verbatim phrase ("친구들이랑") matches best.
    - Latin letters/digits → the lower-cased word; a trailing ``'s``/``s`` of words longer than
      three letters is dropped (``cafes`` → ``cafe``); at most :data:`MAX_TERM_CHARS` characters.

    English function words (:data:`ENGLISH_STOPWORDS`) are dropped. Punctuation, symbols,
    emoji and Hangul jamo (``ㅋㅋㅋ``) give no term (a query of only those has none).
    Every term matches ``\\w+`` (no quote, backslash or space), so it can be written into a
    ``tsquery`` literal unescaped. Raises nothing for any ``str``.
    """
    seen: dict[str, None] = {}
    for run in _RUNS.findall(normalize(text).casefold()):
        if _JAMO.match(run):
            continue
        if _BIGRAM_SCRIPT.match(run):
            if len(run) == 1:
                seen.setdefault(run)
            for i in range(len(run) - 1):
                seen.setdefault(run[i:i + 2])
            continue
        word = run[:MAX_TERM_CHARS]
        if word in ENGLISH_STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss") and word.isalpha():
            word = word[:-1]
        seen.setdefault(word)
    return list(seen)
