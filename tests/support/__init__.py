"""What the tests share, one module per concern (the fixtures are registered once, by
``tests/conftest.py``):

- ``skills``     skill folders, SKILL.md files, personas on disk; the registry built from them;
                 fixtures `skills_root`, `make_skill`
- ``waiting``    the one deadline-bounded waiter: `wait_for` (sync) and `until` (async)
- ``processes``  console scripts of this virtualenv and /proc probes (alive, reaped, zombies)
- ``server``     the app behind a TestClient (fixture `server`) and a real `serve` process
- ``http``       plain loopback HTTP servers in a thread (targets for the built-ins)
- ``llm``        the scripted OpenAI/Anthropic-compatible LLM (fixture `fake`)
- ``agent``      settings aimed at that LLM and one agent run in-process
- ``runner``     executables and SpawnSpecs for the subprocess runner, one call to its outcome
- ``builtins``   the schema checks of the built-in ops skills
- ``mcp``        the MCP world: one real `serve`, sessions over stdio and streamable HTTP
- ``browser``    the web console on loopback (fixture `console`), HTTP sessions against it, and
                 Chromium driven by Playwright (fixtures `browser`, `page`), screenshots
"""
