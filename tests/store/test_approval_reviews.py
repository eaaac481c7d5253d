"""The reviewer's claim on a request, on both engines: one manager (replica) claims it, a second
claim is refused, and only the claimant's finished review is recorded (migration 0010)."""

from __future__ import annotations

from pathlib import Path

from ongrid_skills.store import open_store
from ongrid_skills.store.approvals import Approval, Review


def test_a_request_is_claimed_for_review_once_and_only_the_claim_is_finished(
    tmp_path: Path, database_url: str | None
) -> None:
    store = open_store(str(tmp_path / "data"), database_url)
    try:
        request = Approval(
            id="a1",
            execution_id="e1",
            skill="set_flag",
            skill_class="mutating",
            args={"flag": "on"},
            definition_hash="h",
            persona=None,
            requested_by="olga",
            signatures_required=1,
            status="pending",
            created_at=1.0,
            expires_at=2.0,
        )
        with store.tx() as conn:
            store.approvals.insert(conn, request)
        mine = Review(persona="gatekeeper", status="reviewing", started_at=1.0)
        theirs = Review(persona="gatekeeper", status="reviewing", started_at=1.5)
        with store.tx() as conn:
            assert store.approvals.claim_review(conn, "a1", mine)
            assert not store.approvals.claim_review(conn, "a1", theirs)
        with store.read() as conn:
            assert store.approvals.reviewing_ids(conn) == ["a1"]
        mine.status, mine.decision, mine.opinion = "done", "approve", "Fine."
        with store.tx() as conn:
            assert store.approvals.finish_review(conn, "a1", mine)
            assert not store.approvals.finish_review(conn, "a1", theirs)  # no longer reviewing
        stored = store.approvals.get("a1")
        assert stored is not None and stored.review == mine
        assert stored.to_dict()["review"]["decision"] == "approve"
    finally:
        store.close()
