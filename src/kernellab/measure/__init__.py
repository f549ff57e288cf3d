"""Reading what a guest says: agent records, boot milestones, the kernel's memory line."""
