"""One call, from an admitted request to its outcome: records, the live timeline, the subprocess
runner and its reaper, in-process built-ins, and the pipeline that ties them together.

Nothing here decides permissions (that is :mod:`ongrid_skills.governance`) or writes the store.
"""
