//! Strips comments and indentation from the WGSL kernels (shaders/) before they are embedded:
//! they go into the browser's wasm module, whose size has a budget, and comments are half of
//! their text. Every line is kept, so a shader compiler's line numbers still match shaders/.
//!
//! Also sets `cfg(host_threads)` where the host device's kernels have threads to split work
//! over: natively, and in the browser build made with the `wasm-threads` feature; and
//! `cfg(integer_tiles)` where they have tiles of integer products (`kernels::integer_gemm`):
//! on x86-64, and in wasm builds with relaxed SIMD (its 8-bit dot product).

use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=shaders");
    println!("cargo::rustc-check-cfg=cfg(host_threads)");
    let wasm = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|arch| arch == "wasm32");
    if !wasm || std::env::var_os("CARGO_FEATURE_WASM_THREADS").is_some() {
        println!("cargo::rustc-cfg=host_threads");
    }
    println!("cargo::rustc-check-cfg=cfg(integer_tiles)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let relaxed_simd = std::env::var("CARGO_CFG_TARGET_FEATURE").is_ok_and(|features| features.split(',').any(|f| f == "relaxed-simd"));
    if arch == "x86_64" || (wasm && relaxed_simd) {
        println!("cargo::rustc-cfg=integer_tiles");
    }
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    for entry in std::fs::read_dir("shaders").expect("shaders/ beside Cargo.toml") {
        let path = entry.expect("listing shaders/").path();
        if path.extension().is_none_or(|e| e != "wgsl") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("reading a shader");
        // WGSL has no string literals, so `//` always starts a comment.
        assert!(!source.contains("/*"), "{}: use // comments (build.rs strips only those)", path.display());
        let stripped: Vec<&str> = source.lines().map(|line| line.split_once("//").map_or(line, |(code, _)| code).trim()).collect();
        let name = path.file_name().expect("a shader file name");
        std::fs::write(Path::new(&out).join(name), stripped.join("\n") + "\n").expect("writing a stripped shader");
    }
}
