"""One typed tool per file. A tool never imports the loop; it reaches the world through ctx."""
