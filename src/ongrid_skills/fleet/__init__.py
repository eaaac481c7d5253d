"""Several manager processes as one product (SPEC §17): replicas sharing a PostgreSQL database.

- :mod:`.replica`: this process's lease (a heartbeat row) and the calls of replicas whose lease
  expired, which become ``interrupted``.
- :mod:`.follow`: the timeline of a call that runs in another process, followed through the store.
"""
