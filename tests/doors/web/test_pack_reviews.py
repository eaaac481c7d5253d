"""The uploads kept between a review and its Confirm (doors/web/pack_reviews.py): per session,
used once, bounded in number, expiring."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from starlette.datastructures import UploadFile

from ongrid_skills.doors.web import pack_reviews
from ongrid_skills.doors.web.pack_reviews import MAX_REVIEWS, Reviews
from ongrid_skills.errors import NotFound
from ongrid_skills.packs.home import PackHome


def kept(reviews: Reviews, session: str = "s1", data: bytes = b"archive") -> str:
    archive = UploadFile(io.BytesIO(data), filename="p.tar.gz")
    review = reviews.stage(session, archive, None, shown="p.tar.gz", allow_unsigned=False)
    return reviews.seal(review, "sha256:" + "a" * 64).id


def test_a_review_is_found_by_its_session_only_and_taken_once(tmp_path: Path) -> None:
    reviews = Reviews(PackHome(str(tmp_path)))
    review_id = kept(reviews, data=b"the bytes")
    for session, wanted in (("s2", review_id), ("s1", "../../etc"), ("s1", "x" * 22)):
        with pytest.raises(NotFound, match="upload the archive again"):
            reviews.find(wanted, session)
    taken = reviews.take(review_id, "s1")
    assert taken.archive.read_bytes() == b"the bytes" and taken.signature is None
    assert taken.digest == "sha256:" + "a" * 64
    with pytest.raises(NotFound):
        reviews.take(review_id, "s1")  # a second Confirm of the same review
    reviews.discard(taken)
    assert not reviews.root.exists()  # nothing left behind


def test_reviews_are_bounded_in_number_and_expire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reviews = Reviews(PackHome(str(tmp_path)))
    ids = [kept(reviews) for _ in range(MAX_REVIEWS + 2)]
    left = sorted(p.name for p in reviews.root.iterdir())
    assert len(left) == MAX_REVIEWS and ids[-1] in left and ids[0] not in left
    monkeypatch.setattr(pack_reviews, "REVIEW_SECONDS", -1)  # every one is past its time
    with pytest.raises(NotFound):
        reviews.find(ids[-1], "s1")
    assert list(reviews.root.iterdir()) == []
