"""The console's pack review, driven as a form user drives it: Confirm on the review page."""

from __future__ import annotations

import html
import re

import httpx


def press_confirm(client: httpx.Client, review: httpx.Response, **changed: str) -> httpx.Response:
    """Post the Confirm form of a review page (its hidden fields, ``changed`` replaced)."""
    assert review.status_code == 200 and "Confirm: install" in review.text, review.text[:2000]
    start = review.text.index('class="inline pack-review-confirm"')
    form = review.text[review.text.rindex("<form", 0, start) : review.text.index("</form>", start)]
    action = re.search(r'action="([^"]+)"', form)
    assert action is not None
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form))
    return client.post(html.unescape(action[1]), data={**fields, **changed})
