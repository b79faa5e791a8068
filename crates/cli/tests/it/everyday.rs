//! The everyday command line (issue 16, part 5): shell completions and man pages from the one
//! clap definition, and `run --dry-run` that says what a plan would do without touching
//! anything.
