"""What agents and people use: the Python client, HTTP, MCP, the CLI and LangChain.

The LangChain module needs the ``[langchain]`` extra.
"""
