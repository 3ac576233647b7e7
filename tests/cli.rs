//! The `sesame` command line's contract: `info` and `bench kernels` output that other tools
//! parse.

use std::process::Command;

fn sesame(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sesame")).args(args).output().expect("run sesame");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn info_reports_the_adapter_as_text_and_json() {
    let (ok, text, err) = sesame(&["info"]);
    assert!(ok, "{err}");
    for field in ["adapter", "backend", "device type", "kernels", "max_storage_buffer_binding_size"] {
        assert!(text.contains(field), "missing {field} in:\n{text}");
    }
    let (ok, json, err) = sesame(&["info", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    assert!(v["name"].as_str().is_some_and(|n| !n.is_empty()));
    assert!(["tiled", "blocked"].contains(&v["kernels"].as_str().unwrap()));
    assert!(v["limits"].as_array().is_some_and(|l| !l.is_empty()));
}

#[test]
fn bench_prints_one_json_object_per_line() {
    let (ok, out, err) = sesame(&["bench", "kernels", "--only", "dispatch", "--budget-ms", "5"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["op"], "dispatch");
    assert!(v["ms"].as_f64().is_some_and(|ms| ms > 0.0));
    assert!(v["gbps"].is_number() && v["adapter"].is_string() && v["shape"].is_string());
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let (ok, _, err) = sesame(&["--kernels", "fast", "info"]);
    assert!(!ok);
    assert!(err.contains("fast") && err.contains("tiled"), "{err}");
    let (ok, _, err) = sesame(&["--adapter", "no-such-adapter", "info"]);
    assert!(!ok);
    assert!(err.contains("no GPU adapter") && err.contains("no-such-adapter"), "{err}");
}
