"""memdir.agents: plugging memdir into coding agents.

Owns the hook events (:mod:`.hooks`, reading the agent's transcript in :mod:`.hook_transcript`),
installing them for Claude Code and Codex (:mod:`.hooks_install`, :mod:`.hooks_agents`,
:mod:`.codex_toml`, :mod:`.settings_files`, :mod:`.settings_json`), the MCP server
(:mod:`.mcp_server`, :mod:`.mcp_tools`), the background daemon that keeps models warm
(:mod:`.daemon`) and the agent prompt section and recall prefetch of the public API
(:mod:`.agent`).

Import rule: agents are adapters: they call the :class:`~memdir.memdir.Memdir` facade and may
import any package below it; nothing outside the CLI imports them. Hooks never break the
agent: every failure is logged and the hook exits 0. The MCP framework is imported only by
:mod:`.mcp_server` and :mod:`.mcp_tools`.
"""
