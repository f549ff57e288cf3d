"""Where a kernel runs: QEMU today; real hardware over ssh later."""
