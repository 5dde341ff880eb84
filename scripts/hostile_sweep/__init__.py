"""The hostile sweep: generated hostile inputs against kiln's Python API (see
scripts/hostile-sweep). Cases are Python source, so every finding comes with a one-line
reproducer; a worker process runs them in batches so crashes and hangs are caught."""
