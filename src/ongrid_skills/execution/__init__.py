"""One call, from an admitted request to its outcome: records, the live timeline, the runners
(the :class:`~ongrid_skills.execution.runner.Runner` protocol; the subprocess runner with its
stdout decoding in ``wire``, its stderr events in ``stderr``, its orphan reaper, and the
``supervision`` that kills a dead manager's children through the ``sentinel``; a function-backed
runner for tests), in-process built-ins, and the pipeline that ties them together.

Nothing here decides permissions (that is :mod:`ongrid_skills.governance`) or writes the store.
"""
