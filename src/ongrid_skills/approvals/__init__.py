"""Approvals (SPEC §5): the desk and its parts. Import the modules themselves:

- :mod:`.desk` — :class:`~.desk.ApprovalDesk`, requests and signatures (the desk's rules);
- :mod:`.runs` — :class:`~.runs.Runs`, the narrow port through which the desk sees the manager;
- :mod:`.checks` — whether a request may still run, asked at signing and before the run;
- :mod:`.ledger` — ending a request, and telling its feed and listeners of every change;
- :mod:`.feed` — the live feed of every change of a request (the inbox streams);
- :mod:`.opinions` — the reviewer's opinions: claimed once, attached, counted where allowed;
- :mod:`.lifecycle` — the approved run, started once; expiry, the sweeper, start-up recovery.
"""
