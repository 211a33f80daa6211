"""The MCP server's parts (:mod:`qortex_core.mcp_server` assembles them).

``backend``: one memory per tenant behind an embedder that loads in the background;
``tool_kit``: how a tool is registered (typed output schema, annotations, one-line errors);
``read_tools`` and ``write_tools``: the tools; ``auth``: bearer tokens mapped to tenants.
"""
