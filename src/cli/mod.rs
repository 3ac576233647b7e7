//! The `sesame` binary's commands (the library does the work; these parse files and flags).

pub mod forward;
