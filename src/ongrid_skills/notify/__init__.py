"""Telling people about approvals, outside the product: the approval desk's events and the
webhooks they are sent to.

- :mod:`~ongrid_skills.notify.events`: :class:`ApprovalEvent` and the listener port the desk
  calls after each committed change (request, signature, approval, rejection, expiry…).
- :mod:`~ongrid_skills.notify.messages`: an event → the JSON of a Slack or Mattermost incoming
  webhook (``text`` plus ``blocks``), with a link to the request's page.
- :mod:`~ongrid_skills.notify.webhooks`: :class:`WebhookNotifier`, the asynchronous sender
  (a bounded queue and a worker per URL, retries with backoff, every outcome audited).

The desk sees only the port; HTTP lives in ``webhooks`` alone.
"""
