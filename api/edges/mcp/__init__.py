"""settled as an MCP server: `/mcp` on the API (Model Context Protocol, streamable HTTP, the `mcp`
package). An MCP client gets the adapters' tool set under the adapters' rules: it is an edge
(`settled.api.edges.inprocess`), an adapter hosted in the API process that asks this same API."""
