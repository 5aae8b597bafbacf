"""``pinlog.text.prime``: texts analysed ahead, as one batch on the analyser's threads, give
exactly what ``analyse`` gives, and ``analyse`` takes them instead of analysing again."""

from __future__ import annotations

from pinlog import text

NOTES = ["비 오는 날 우산 접고 들어갔는데 분위기가 좋았다", "친구들이랑 맥주 한잔하기 좋은 곳",
         "부모님 모시고 조용히 식사하기 좋은 한정식집", "Great coffee, friendly staff"]


def test_primed_texts_analyse_to_exactly_what_analyse_gives(monkeypatch):
    expected = [text.analyse(note) for note in NOTES]  # analysed on the calling thread
    real = text._analyser()
    calls: list[object] = []

    class Counting:
        def tokenize(self, value):
            calls.append(value)
            return real.tokenize(value)

    monkeypatch.setattr(text, "_analyser", lambda: Counting())
    text.prime(NOTES + [NOTES[0], "   "])  # repeats and blank texts are left out
    assert calls == [NOTES]  # one batch
    assert [text.analyse(note) for note in NOTES] == expected
    assert calls == [NOTES]  # taken from the primed results, not analysed again
    assert text.analyse(NOTES[0]) == expected[0] and calls[-1] == NOTES[0]  # taken once only


def test_primed_results_are_bounded_oldest_dropped(monkeypatch):
    monkeypatch.setattr(text, "PRIMED_MAX", 2)
    monkeypatch.setattr(text, "_primed", type(text._primed)())
    text.prime(NOTES[:3])
    assert list(text._primed) == [text.normalize(n) for n in NOTES[1:3]]
