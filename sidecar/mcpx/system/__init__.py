"""The operating system as mcpx meets it: where state lives, other processes, sockets, the keychain,
an agent's shell, and where the plugin and the skill are installed from."""
