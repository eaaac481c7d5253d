"""The built-in (in-process) skills and their catalogue."""
