"""The agent stage (``harness solve``): a pinned scaffold runs in a working sandbox, its
attempts are recorded, and their tree diffs become predictions. Importing the package
loads no module."""
