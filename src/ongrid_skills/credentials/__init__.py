"""Credentials: secrets that skills use and models never see (SPEC §18).

- :mod:`.cipher` seals stored values with AES-GCM under a key kept outside the database;
- :mod:`.sources` reads a field at call time: a sealed value, a file, a variable of the
  manager's environment or the output of a command the operator configured;
- :mod:`.service` is what every door calls: create, rotate, delete, list, bind, unbind, and
  what a skill's call gets (:class:`~.service.Injection`);
- :mod:`.calldir` is the private per-call ``$CREDENTIALS_DIRECTORY``.

Values are write-only: nothing here returns one to a caller that shows things, and the runner
masks every value a call was given in all that the call writes (``execution/masking.py``).
"""
