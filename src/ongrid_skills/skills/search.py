"""Ranking skills for ``search_skills``: BM25 over name, description and when_to_use.

The index is built once per registry snapshot (lazily, on the first search) and shared by every
query on it: a query over 10,000 skills scores only the postings of its terms.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable

from ongrid_skills.skills.model import Skill

_WORD_RE = re.compile(r"[^\W_]+")  # letters and digits of any script; ``_`` splits
K1 = 1.2
B = 0.75
NAME_WEIGHT = 3  # a term in the name counts as three occurrences


def tokens(text: str) -> list[str]:
    """Lower-case words; snake_case names split into their parts.

    >>> tokens("probe_tcp: Probe a TCP port")
    ['probe', 'tcp', 'probe', 'a', 'tcp', 'port']
    >>> tokens("Comprueba la conexión")
    ['comprueba', 'la', 'conexión']
    """
    return _WORD_RE.findall(text.lower())


class SearchIndex:
    """A BM25 index of some skills: postings per word, a term in the name counting triple."""

    def __init__(self, skills: Iterable[Skill]) -> None:
        self.skills: list[Skill] = []
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for skill in skills:
            doc = len(self.skills)
            self.skills.append(skill)
            counts: Counter[str] = Counter()
            for word in tokens(skill.name):
                counts[word] += NAME_WEIGHT
            counts[skill.name] += NAME_WEIGHT
            counts.update(tokens(skill.description))
            if skill.when_to_use:
                counts.update(tokens(skill.when_to_use))
            self.lengths.append(sum(counts.values()))
            for word, tf in counts.items():
                self.postings.setdefault(word, []).append((doc, tf))
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0

    def search(
        self, query: str, limit: int = 10, keep: Callable[[Skill], bool] | None = None
    ) -> list[tuple[Skill, float]]:
        """The best ``limit`` skills for ``query`` that ``keep`` accepts, with their scores."""
        scores: dict[int, float] = {}
        total = len(self.skills)
        for word in set(tokens(query)) | ({query.strip().lower()} - {""}):
            posting = self.postings.get(word)
            if not posting:
                continue
            idf = math.log(1 + (total - len(posting) + 0.5) / (len(posting) + 0.5))
            for doc, tf in posting:
                norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.lengths[doc] / self.average))
                scores[doc] = scores.get(doc, 0.0) + idf * norm
        ranked = sorted(scores.items(), key=lambda item: (-item[1], self.skills[item[0]].name))
        out: list[tuple[Skill, float]] = []
        for doc, score in ranked:
            skill = self.skills[doc]
            if keep is not None and not keep(skill):
                continue
            out.append((skill, round(score, 4)))
            if len(out) >= limit:
                break
        return out
