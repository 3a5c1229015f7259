"""One typed tool per file. A tool never imports the loop; it reaches the world through ctx."""

import warnings

# asyncssh (tools/hosts) still names DSA keys in its type aliases, and cryptography >= 51 warns
# about DSA at that import: ten lines on every `agent` command's stderr before its one-line
# error. We never offer or accept DSA keys. Here, because every `import asyncssh` of ours comes
# after this package's import.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh\.")
