"""What a booted kernel says: the agent's framed records, the kernel's console, and the
measurement session that turns both into samples and a verdict."""
