//! The `sesame` command line's contract: `info` and `bench kernels` output that other tools
//! parse.

mod common;

use common::sesame;

#[test]
fn info_reports_the_adapter_as_text_and_json() {
    let (ok, text, err) = sesame(&["info"]);
    assert!(ok, "{err}");
    for field in ["adapter", "backend", "device type", "kernels", "max_storage_buffer_binding_size", "picked"] {
        assert!(text.contains(field), "missing {field} in:\n{text}");
    }
    assert!(!err.contains("XDG_RUNTIME_DIR"), "Mesa's device-select layer is quiet: {err}");
    // By default: the host device where the best adapter is a CPU rasterizer (lavapipe here),
    // a GPU adapter where there is one; info says which and why.
    let (ok, json, err) = sesame(&["info", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    let why = v["picked"].as_str().unwrap_or_default();
    match v["kernels"].as_str() {
        Some("host") => assert!(why.contains("CPU rasterizer") || why.contains("no GPU adapter"), "{v}"),
        _ => assert!(why.contains("a GPU"), "{v}"),
    }
    // --kernels asks for WGSL kernels: an adapter, whatever it is.
    let (ok, json, err) = sesame(&["--kernels", "blocked", "info", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    assert!(v["name"].as_str().is_some_and(|n| !n.is_empty()));
    assert_eq!(v["kernels"].as_str(), Some("blocked"));
    assert!(v["limits"].as_array().is_some_and(|l| !l.is_empty()));
    assert!(v["threads"].is_null(), "a GPU adapter has no host threads: {v}");
    // The host device takes every core, or --threads.
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    for (threads, want) in [(None, cores), (Some("3"), 3)] {
        let mut args = vec!["--adapter", "host", "info", "--json"];
        args.extend(threads.iter().flat_map(|n| ["--threads", n]));
        let (ok, json, err) = sesame(&args);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
        assert_eq!((v["kernels"].as_str(), v["threads"].as_u64()), (Some("host"), Some(want)), "{v}");
    }
    let (ok, _, err) = sesame(&["--kernels", "blocked", "--threads", "2", "info"]);
    assert!(!ok && err.contains("--threads") && err.contains("--adapter host"), "--threads without the host device: {err}");
    let (ok, _, err) = sesame(&["--adapter", "host", "--threads", "0", "info"]);
    assert!(!ok && err.contains("--threads"), "{err}");
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
fn bench_times_quantized_products_with_their_operations_and_bytes() {
    let (ok, out, err) = sesame(&["--adapter", "host", "bench", "kernels", "--only", "matmul_q8", "--budget-ms", "1"]);
    assert!(ok, "{err}");
    let records: Vec<serde_json::Value> = out.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let shapes: Vec<&str> = records.iter().map(|v| v["shape"].as_str().unwrap()).collect();
    assert_eq!(
        shapes,
        [
            "1x768x3072 (W [N, K])",
            "1x768x50257 (W [N, K])",
            "8x768x3072 (W [N, K])",
            "31x768x3072 (W [N, K])",
            "32x768x3072 (W [N, K])",
            "128x768x3072 (W [N, K])",
            "4096x384x1536 (W [N, K])"
        ],
        "{out}"
    );
    for v in &records {
        assert_eq!(v["op"], "matmul_q8");
        assert!(v["gflops"].as_f64().is_some_and(|g| g > 0.0) && v["gbps"].as_f64().is_some_and(|g| g > 0.0), "{v}");
    }
}

#[test]
fn bench_measures_the_cpus_arithmetic_peaks_on_the_host_device() {
    let (ok, out, err) = sesame(&["--adapter", "host", "--threads", "2", "bench", "kernels", "--only", "peak", "--budget-ms", "1"]);
    assert!(ok, "{err}");
    let records: Vec<serde_json::Value> = out.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let ops: Vec<&str> = records.iter().map(|v| v["op"].as_str().unwrap()).collect();
    #[cfg(target_arch = "x86_64")]
    let expected: Vec<&str> = {
        let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
        let avx512 = is_x86_feature_detected!("avx512f");
        [
            (avx2, "peak_f32_fma"),
            (avx2, "peak_i16_madd"),
            (avx2, "peak_i8_maddubs"),
            (avx512, "peak_f32_fma_512"),
            (avx2 && is_x86_feature_detected!("avxvnni"), "peak_i8_vnni_256"),
            (avx512 && is_x86_feature_detected!("avx512vnni"), "peak_i8_vnni_512"),
        ]
        .into_iter()
        .filter_map(|(has, op)| has.then_some(op))
        .collect()
    };
    #[cfg(not(target_arch = "x86_64"))]
    let expected: Vec<&str> = Vec::new();
    assert_eq!(ops, expected, "{out}");
    for v in &records {
        assert!(v["gflops"].as_f64().is_some_and(|g| g > 0.0) && v["ms"].as_f64().is_some_and(|ms| ms > 0.0), "{v}");
        assert!(v["shape"].as_str().is_some_and(|s| s.ends_with("2 threads")), "{v}");
    }
}

#[test]
fn bench_train_times_gpt2_training_steps() {
    #[rustfmt::skip]
    let (ok, out, err) = sesame(&["bench", "train", "--layers", "1", "--heads", "2", "--hidden", "16", "--context", "8", "--vocab", "30", "--batch-size", "2", "--steps", "2"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["op"], "gpt2_train_step");
    assert!(v["shape"].as_str().is_some_and(|s| s.contains("batch 2 × context 8")), "{v}");
    assert!(v["per_second"].as_f64().is_some_and(|tokens| tokens > 0.0));
    let (ok, _, err) = sesame(&["bench", "train", "--heads", "5", "--steps", "1"]);
    assert!(!ok && err.contains("multiple of the heads"), "{err}");
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

/// `sesame forward --ids` on a fixture writes exactly transformers' outputs, by name.
#[test]
fn forward_writes_every_output_under_transformers_names() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    // [batch, choices, seq] ids (multiple choice) and ERNIE's task_type_ids too.
    let dirs = [
        "bert/BertForPreTraining",
        "gpt2/GPT2LMHeadModel",
        "openai-gpt/OpenAIGPTModel",
        "xlm-roberta/XLMRobertaForMultipleChoice",
        "ernie/ErnieModel",
        "distilbert/DistilBertForQuestionAnswering",
    ];
    for dir in dirs.map(|d| root.join(d)) {
        let out = std::env::temp_dir().join(format!("sesame-forward-{}-{}.safetensors", std::process::id(), dir.file_name().unwrap().to_string_lossy()));
        let inputs = dir.join("inputs.json");
        let args =
            ["forward", "--model", dir.to_str().unwrap(), "--ids", inputs.to_str().unwrap(), "--out", out.to_str().unwrap(), "--hidden-states", "--attentions"];
        let (ok, _, err) = sesame(&args);
        assert!(ok, "{err}");
        let got = sesame::weights::Checkpoint::from_bytes(std::fs::read(&out).unwrap()).unwrap();
        let want = sesame::weights::Checkpoint::from_bytes(std::fs::read(dir.join("reference.safetensors")).unwrap()).unwrap();
        let mut names: Vec<&str> = want.names().collect();
        names.sort_unstable();
        let mut got_names: Vec<&str> = got.names().collect();
        got_names.sort_unstable();
        assert_eq!(got_names, names, "{}", dir.display());
        for name in names {
            let ((g, gs), (w, ws)) = (got.to_f32(name).unwrap(), want.to_f32(name).unwrap());
            assert_eq!(gs, ws, "{name}");
            let err = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(err <= 1e-4, "{} {name}: {err}", dir.display());
        }
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn forward_rejects_bad_requests_clearly() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let gpt2 = root.join("gpt2/GPT2LMHeadModel");
    let out = std::env::temp_dir().join("sesame-never-written.safetensors");
    let bare = std::env::temp_dir().join(format!("sesame-no-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(&bare).unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(gpt2.join(file), bare.join(file)).unwrap();
    }
    let (ok, _, err) = sesame(&["forward", "--model", bare.to_str().unwrap(), "--text", "hello", "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("no tokenizer.json"), "{err}");
    std::fs::remove_dir_all(&bare).unwrap();
    let (ok, _, err) = sesame(&["forward", "--model", "/no/such/model", "--text", "hi", "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("/no/such/model: not a model directory"), "{err}");
    let bert = root.join("bert/BertModel");
    let ids = std::env::temp_dir().join(format!("sesame-ragged-{}.json", std::process::id()));
    std::fs::write(&ids, r#"{"input_ids": [[2, 5, 3], [2, 3]]}"#).unwrap();
    let forward = |model: &std::path::Path, json: &str| {
        std::fs::write(&ids, json).unwrap();
        sesame(&["forward", "--model", model.to_str().unwrap(), "--ids", ids.to_str().unwrap(), "--out", out.to_str().unwrap()])
    };
    let (ok, _, err) = forward(&bert, r#"{"input_ids": [[2, 5, 3], [2, 3]]}"#);
    assert!(!ok && err.contains("row 1"), "{err}");
    let (ok, _, err) = forward(&bert, r#"{"input_ids": [[2, 5, 3]], "attention_mask": [[1, 1]]}"#);
    assert!(!ok && err.contains("attention_mask is [1, 2], input_ids is [1, 3]"), "{err}");
    // Multiple-choice ids of the wrong rank, for the wrong model; task types without ERNIE.
    let choices = root.join("roberta/RobertaForMultipleChoice");
    let (ok, _, err) = forward(&choices, r#"{"input_ids": [[0, 5, 2]]}"#);
    assert!(!ok && err.contains("give ids as [batch, choices, seq]"), "{err}");
    let (ok, _, err) = forward(&bert, r#"{"input_ids": [[[2, 5, 3], [2, 6, 3]]]}"#);
    assert!(!ok && err.contains("are for multiple-choice models"), "{err}");
    let (ok, _, err) = forward(&choices, r#"{"input_ids": [[[0, 5, 2], [0, 6, 2]], [[0, 5, 2]]]}"#);
    assert!(!ok && err.contains("example 1 has 1 choices"), "{err}");
    let (ok, _, err) = forward(&bert, r#"{"input_ids": [[2, 5, 3]], "task_type_ids": [[0, 0, 0]]}"#);
    assert!(!ok && err.contains("no task type embeddings"), "{err}");
    // A bad value or rank is named with the input and the element.
    let (ok, _, err) = forward(&bert, r#"{"input_ids": [[2, -5, 3]]}"#);
    assert!(!ok && err.contains("input_ids[0][1] is -5"), "{err}");
    let (ok, _, err) = forward(&bert, r#"{"input_ids": [[2, 5, 3]], "attention_mask": [1, 1, 1]}"#);
    assert!(!ok && err.contains("attention_mask has 1 dimension:"), "{err}");
    std::fs::remove_file(&ids).unwrap();
    assert!(!out.exists(), "nothing is written on failure");
}

#[test]
fn info_describes_a_model_folder() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let albert = root.join("albert/AlbertForPreTraining");
    let (ok, text, err) = sesame(&["info", "--model", albert.to_str().unwrap()]);
    assert!(ok, "{err}");
    for line in [
        "family        ALBERT (model_type albert)",
        "architecture  AlbertForPreTraining",
        "tasks         fill-mask, next-sentence-prediction, feature-extraction",
        "layers        3 (5 attention heads, hidden size 30)",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    let (ok, json, err) = sesame(&["info", "--model", root.join("roberta/RobertaForSequenceClassification").to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["model_type"], "roberta");
    assert_eq!(v["tasks"], serde_json::json!(["text-classification", "feature-extraction", "zero-shot-classification"]));
    assert_eq!(v["labels"], serde_json::json!(["contradiction", "neutral", "entailment"]));
    assert_eq!(v["max_positions"], 38);
    let stored =
        sesame::weights::Checkpoint::from_bytes(std::fs::read(root.join("roberta/RobertaForSequenceClassification/model.safetensors")).unwrap()).unwrap();
    let values: u64 = stored.names().map(|n| stored.shape(n).unwrap().iter().product::<usize>() as u64).sum();
    assert_eq!(v["parameters"].as_u64(), Some(values));
    assert_eq!(v["weight_bytes"].as_u64(), Some(4 * values));
    // An unknown family lists the known ones.
    let dir = std::env::temp_dir().join(format!("sesame-t5-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), r#"{"model_type": "t5"}"#).unwrap();
    std::fs::copy(albert.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
    let (ok, _, err) = sesame(&["info", "--model", dir.to_str().unwrap()]);
    assert!(
        !ok && err.contains("unknown model_type `t5`")
            && ["roberta", "xlm-roberta-xl", "distilbert", "albert", "ernie", "electra"].iter().all(|t| err.contains(t)),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
