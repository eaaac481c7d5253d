"""What a skill is and where it comes from: the Skill model, schemas, the skill.json and SKILL.md
formats, personas, discovery of allow-listed dirs, the immutable registry, search and lint.

Pure data and file reading: nothing here runs a skill, asks the gate, or imports a built-in
(built-ins are resolved by name in :mod:`ongrid_skills.skills.impls`).
"""
