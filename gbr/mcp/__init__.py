"""Model Context Protocol access to the index, for AI agents (`gleambrctl mcp`)."""
