//! The `sesame` binary (src/cli/). The command line is native only: a wasm32 build (the
//! library's wasm tests) gets an empty binary.

#[cfg(not(target_arch = "wasm32"))]
mod cli;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    cli::main()
}

#[cfg(target_arch = "wasm32")]
fn main() {}
