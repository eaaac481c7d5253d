"""Several processes as one product (SPEC §17): replicas on PostgreSQL, edge workers over NATS.

Replicas:

- :mod:`.replica`: this process's lease (a heartbeat row) and the calls of replicas whose lease
  expired, which become ``interrupted``.
- :mod:`.follow`: the timeline of a call that runs in another process, followed through the store;
  :mod:`.notices`: LISTEN/NOTIFY between replicas, which wakes those followers and carries the
  live events of a call followed from elsewhere (psycopg is imported only when it connects).

Edge workers (the NATS client is imported only by these, and only with a fleet configured):

- :mod:`.bus`: connecting to NATS, the names of the bucket, streams and subjects;
- :mod:`.signing`: the manager's key and the signed calls; :mod:`.nonces`: the worker's ledger;
- :mod:`.inventory`: what a worker announces; :mod:`.catalogue`: the manager's view of the hosts;
- :mod:`.wire`: a call's messages back; :mod:`.dispatch`: the manager's end; :mod:`.worker`: the
  worker's.
"""
